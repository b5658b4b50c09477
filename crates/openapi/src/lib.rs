//! OpenAPI 3.0 and 3.1 request (and, optionally, response) validation for
//! sluice, cheap enough for a proxy's hot path.
//!
//! [`Spec`] loads a document (YAML or JSON); [`Validator::new`] compiles it
//! once: a path-template trie, the operations of each path, hand-written
//! checks for primitive parameters (path, query, header, cookie), and a
//! [`jsonschema`] validator for each JSON request body (and, with
//! [`ValidatorOptions::validate_responses`], each JSON response body).
//! Validating a request that matches an operation with only simple
//! parameters allocates nothing unless it is invalid.
//!
//! ```
//! use openapi::{Outcome, Request, Spec, Validator, ValidatorOptions};
//!
//! let spec = Spec::from_str(
//!     r#"
//! openapi: 3.0.3
//! info: { title: t, version: "1" }
//! paths:
//!   /v1/pets:
//!     get:
//!       operationId: listPets
//!       parameters:
//!         - { name: limit, in: query, schema: { type: integer, minimum: 1, maximum: 100 } }
//!       responses: { "200": { description: ok } }
//! "#,
//!     "inline.yaml",
//! )?;
//! let validator = Validator::new(&spec, ValidatorOptions::default())?;
//!
//! let ok = Request::new("GET", b"/v1/pets").with_query(b"limit=10");
//! assert_eq!(validator.validate(&ok), Outcome::Valid { operation_id: Some("listPets") });
//!
//! let bad = Request::new("GET", b"/v1/pets").with_query(b"limit=0");
//! let Outcome::Invalid(violations) = validator.validate(&bad) else { panic!() };
//! assert_eq!(violations[0].pointer, "/query/limit");
//! # Ok::<(), openapi::SpecError>(())
//! ```
//!
//! A proxy that buffers bodies only when it must uses the two-step form:
//! [`Validator::match_operation`], then [`Matched::needs_body`],
//! [`Matched::validate_head`] and [`Matched::validate_body`] (or
//! [`Matched::validate`] for both).
//!
//! Responses are checked only when [`ValidatorOptions::validate_responses`]
//! is on (it is off by default, and then response schemas are not even
//! compiled). Keep the request's [`OperationRef`] ([`Matched::operation_ref`]
//! or [`Validator::operation_ref`]: `Copy`, no lifetimes) until the response
//! arrives, ask [`Validator::response_wants_body`] whether its body is worth
//! buffering, then call [`Validator::validate_response`]:
//!
//! ```
//! use openapi::{ResponseOutcome, Spec, Validator, ValidatorOptions};
//!
//! let spec = Spec::from_str(
//!     r#"
//! openapi: 3.1.0
//! info: { title: t, version: "1" }
//! paths:
//!   /v1/pets:
//!     get:
//!       responses:
//!         "200":
//!           description: ok
//!           content:
//!             application/json:
//!               schema: { type: array, items: { type: object, required: [id] } }
//!         default: { description: an error, without a described body }
//! "#,
//!     "inline.yaml",
//! )?;
//! let options = ValidatorOptions { validate_responses: true, ..ValidatorOptions::default() };
//! let validator = Validator::new(&spec, options)?;
//!
//! let op = validator.operation_ref("GET", b"/v1/pets").expect("declared");
//! let json = Some(&b"application/json"[..]);
//! assert!(validator.response_wants_body(op, 200, json));
//! assert!(validator.validate_response(op, 200, json, Some(br#"[{"id":1}]"#)).is_valid());
//!
//! let ResponseOutcome::Invalid(violations) =
//!     validator.validate_response(op, 200, json, Some(br#"[{"name":"x"}]"#))
//! else { panic!() };
//! assert_eq!(violations[0].pointer, "/body/0");
//!
//! // 500 is covered by `default`, which describes no body.
//! assert!(!validator.response_wants_body(op, 500, json));
//! assert!(validator.validate_response(op, 500, json, None).is_valid());
//! # Ok::<(), openapi::SpecError>(())
//! ```
//!
//! What is checked, and how:
//! - Paths: literal segments beat partly templated ones (`/r/{n}.{ext}`),
//!   which beat `{param}` segments; literals compare percent-decoded; `.`
//!   and `..` segments and trailing slashes match nothing (normalising dot
//!   segments is the proxy's job). Methods are case-sensitive; `HEAD` is
//!   not implied by `GET`.
//! - Parameters (path `simple`; query `form` exploded or not,
//!   `spaceDelimited`, `pipeDelimited`; header; cookie): integer, number,
//!   string and boolean values and arrays of them are checked by hand
//!   (bounds in the 3.0 and 3.1 forms, `multipleOf`, `format: int32/int64`,
//!   lengths, `pattern`, `enum`/`const`, item counts and uniqueness).
//!   Richer schemas (`oneOf`, `allOf`, ...) are checked with `jsonschema` on
//!   the value coerced to the types they name; `content: application/json`
//!   parameters are parsed as JSON. Object parameters and `deepObject`,
//!   `label` and `matrix` styles are only checked for presence, with a
//!   [`Validator::warnings`] entry. A non-array parameter given twice is a
//!   violation; unknown query parameters are allowed.
//! - Bodies: the media type is matched (exact, `type/*+suffix`, `type/*`,
//!   `*/*`; no `Content-Type` counts as `application/octet-stream`); JSON
//!   bodies (`application/json`, `*+json`) are checked against their schema
//!   as JSON Schema 2020-12, 3.0 schemas translated first (see the
//!   `nullable` and exclusive-bound rules in [`Validator::new`]). JSON nested
//!   deeper than 128 levels is rejected by the parser, before any schema
//!   code runs. Other media types are not inspected.
//! - Responses: the status picks the response (exact code, then a `2XX`
//!   range, then `default`; none is [`ResponseOutcome::Undeclared`]); its
//!   media types are matched like a request body's (none matching is
//!   [`ResponseOutcome::UnsupportedMediaType`]), and a JSON body is checked
//!   against its schema, translated like a request body's except that
//!   3.0 `readOnly` properties stay required and `writeOnly` ones do not.
//!   Declared content that never came is a violation, except for `HEAD`,
//!   1xx, 204 and 304. Each schema is compiled once however many responses
//!   share it. Response headers are not checked.
//! - Patterns use the linear-time `regex` crate, so no input can make a
//!   check backtrack; look-around in a spec's pattern is a [`SpecError`].

use std::fmt;
use std::ops::Range;

mod param;
mod router;
mod schema;
mod spec;
mod text;
mod validator;

pub use spec::{OpenApiVersion, Spec, SpecError};
pub use validator::{Matched, OperationRef, Validator};

/// How requests the spec does not describe are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownOperation {
    /// Unknown paths give [`Outcome::NoSuchPath`] (404), undeclared methods
    /// [`Outcome::MethodNotAllowed`] (405).
    #[default]
    NotFound,
    /// Both give [`Outcome::Unmatched`]: let them through unvalidated.
    Pass,
}

/// Options for [`Validator::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatorOptions {
    /// A prefix the request path must start with, removed before matching
    /// the spec's paths (`/api` lets `/api/v1/pets` match `/v1/pets`).
    /// Default: none, paths match as written in the spec.
    pub base_path: Option<String>,
    /// What to do with requests for operations not in the spec.
    pub unknown_operation: UnknownOperation,
    /// Bodies longer than this give [`Outcome::PayloadTooLarge`]. Default 1 MiB.
    pub max_body_bytes: usize,
    /// Assert JSON Schema `format`s (`date-time`, `email`, `uuid`, ...) in
    /// bodies and in parameters checked by `jsonschema`. Default true.
    pub validate_formats: bool,
    /// Compile the operations' `responses` too, for
    /// [`Validator::validate_response`]. Off, responses are neither compiled
    /// (nor can their faults fail [`Validator::new`]) nor checked. Default
    /// false.
    pub validate_responses: bool,
}

impl Default for ValidatorOptions {
    fn default() -> Self {
        Self {
            base_path: None,
            unknown_operation: UnknownOperation::NotFound,
            max_body_bytes: 1024 * 1024,
            validate_formats: true,
            validate_responses: false,
        }
    }
}

/// The request's header fields, borrowed in whichever form the caller has.
#[derive(Debug, Clone, Copy, Default)]
pub enum Headers<'a> {
    /// No header fields.
    #[default]
    None,
    /// `(name, value)` pairs.
    Pairs(&'a [(&'a [u8], &'a [u8])]),
    /// `(name, value)` byte ranges into `buf`, as an HTTP/1 parser keeps
    /// them; ranges outside `buf` are skipped.
    Ranges {
        /// The buffer holding the request head.
        buf: &'a [u8],
        /// The field name and value ranges.
        fields: &'a [(Range<usize>, Range<usize>)],
    },
}

impl<'a> Headers<'a> {
    /// Every `(name, value)` field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        type Parts<'a> = (
            &'a [(&'a [u8], &'a [u8])],
            &'a [(Range<usize>, Range<usize>)],
            &'a [u8],
        );
        let (pairs, fields, buf): Parts<'a> = match *self {
            Headers::None => (&[], &[], &[]),
            Headers::Pairs(pairs) => (pairs, &[], &[]),
            Headers::Ranges { buf, fields } => (&[], fields, buf),
        };
        pairs.iter().copied().chain(
            fields
                .iter()
                .filter_map(move |(n, v)| Some((buf.get(n.clone())?, buf.get(v.clone())?))),
        )
    }
}

/// A request to validate; everything is borrowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    /// `GET`, `POST`, ... (case-sensitive, as on the wire).
    pub method: &'a str,
    /// The raw (still percent-encoded) path, starting with `/`, without the query.
    pub path: &'a [u8],
    /// The raw query string, without the `?`.
    pub query: Option<&'a [u8]>,
    /// The header fields (consulted only for header and cookie parameters).
    pub headers: Headers<'a>,
    /// The `Content-Type` field value.
    pub content_type: Option<&'a [u8]>,
    /// The body, when there is one and it was buffered. `None` counts as
    /// "no body" only when `content_type` is `None` too; a body that is
    /// present but not buffered (see [`Matched::needs_body`]) is `None` with
    /// a `content_type`. `Some(b"")` is no body.
    pub body: Option<&'a [u8]>,
}

impl<'a> Request<'a> {
    /// A request with this method and raw path, and nothing else.
    pub fn new(method: &'a str, path: &'a [u8]) -> Self {
        Self {
            method,
            path,
            ..Self::default()
        }
    }

    /// With this raw query string.
    #[must_use]
    pub fn with_query(mut self, query: &'a [u8]) -> Self {
        self.query = Some(query);
        self
    }

    /// With these header fields.
    #[must_use]
    pub fn with_headers(mut self, headers: &'a [(&'a [u8], &'a [u8])]) -> Self {
        self.headers = Headers::Pairs(headers);
        self
    }

    /// With this `Content-Type` and body.
    #[must_use]
    pub fn with_body(mut self, content_type: &'a [u8], body: &'a [u8]) -> Self {
        self.content_type = Some(content_type);
        self.body = Some(body);
        self
    }
}

/// One way a request or response breaks the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// A JSON pointer into the request or response: `/path/petId`,
    /// `/query/limit`, `/header/x-request-id` (lower case),
    /// `/cookie/session`, `/body` or `/body/name` (from the body's instance
    /// path); empty for the request as a whole.
    pub pointer: String,
    /// What is wrong; safe to echo (values are quoted, escaped and cut to
    /// 64 characters).
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

/// The verdict on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'v> {
    /// The request matches an operation and breaks none of its rules.
    Valid {
        /// The operation's `operationId`, if it has one.
        operation_id: Option<&'v str>,
    },
    /// The spec has no such operation and the options say to let it
    /// through ([`UnknownOperation::Pass`]).
    Unmatched,
    /// No path in the spec matches (404).
    NoSuchPath,
    /// The path matches but not the method (405).
    MethodNotAllowed {
        /// The methods the path has, for the `Allow` field: `GET, POST`.
        allow: &'v str,
    },
    /// The request breaks the spec (400): every violation found, up to 64.
    Invalid(Vec<Violation>),
    /// The body's media type is not one the operation accepts (415).
    UnsupportedMediaType {
        /// The media types the operation accepts: `application/json`.
        accepted: &'v str,
    },
    /// The body is longer than [`ValidatorOptions::max_body_bytes`] (413).
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl Outcome<'_> {
    /// The request may be forwarded: [`Outcome::Valid`] or [`Outcome::Unmatched`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Outcome::Valid { .. } | Outcome::Unmatched)
    }

    /// The HTTP status to answer with when not allowed (200 when allowed).
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Valid { .. } | Outcome::Unmatched => 200,
            Outcome::NoSuchPath => 404,
            Outcome::MethodNotAllowed { .. } => 405,
            Outcome::Invalid(_) => 400,
            Outcome::UnsupportedMediaType { .. } => 415,
            Outcome::PayloadTooLarge { .. } => 413,
        }
    }
}

/// The verdict on a response ([`Validator::validate_response`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseOutcome<'v> {
    /// The response breaks none of the rules the spec gives for it (or the
    /// spec gives none).
    Valid,
    /// The operation declares responses, but none for this status and no
    /// `default`.
    Undeclared {
        /// The statuses it declares: `200, 4XX, default`.
        declared: &'v str,
    },
    /// The response for this status declares content, but not of the
    /// response's media type.
    UnsupportedMediaType {
        /// The media types declared for this status: `application/json`.
        declared: &'v str,
    },
    /// The body breaks the spec: every violation found, up to 64, pointers
    /// starting with `/body`.
    Invalid(Vec<Violation>),
}

impl ResponseOutcome<'_> {
    /// [`ResponseOutcome::Valid`].
    pub fn is_valid(&self) -> bool {
        matches!(self, ResponseOutcome::Valid)
    }
}

/// The most violations reported for one request or response.
pub(crate) const MAX_VIOLATIONS: usize = 64;

/// Collects violations up to [`MAX_VIOLATIONS`].
#[derive(Debug, Default)]
pub(crate) struct Violations {
    list: Vec<Violation>,
    overflowed: bool,
}

impl Violations {
    pub(crate) fn push(&mut self, violation: Violation) {
        if self.list.len() < MAX_VIOLATIONS {
            self.list.push(violation);
        } else {
            self.overflowed = true;
        }
    }

    /// Adds a violation at `pointer` (plus `/index` for an array item).
    pub(crate) fn add(&mut self, pointer: &str, index: Option<usize>, message: String) {
        let pointer = match index {
            Some(i) => format!("{pointer}/{i}"),
            None => pointer.to_owned(),
        };
        self.push(Violation { pointer, message });
    }

    pub(crate) fn is_full(&self) -> bool {
        self.list.len() >= MAX_VIOLATIONS
    }

    pub(crate) fn overflowed(&mut self) {
        self.overflowed = true;
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn into_vec(mut self) -> Vec<Violation> {
        if self.overflowed {
            self.list.push(Violation {
                pointer: String::new(),
                message: format!(
                    "more violations were found; only the first {MAX_VIOLATIONS} are listed"
                ),
            });
        }
        self.list
    }
}
