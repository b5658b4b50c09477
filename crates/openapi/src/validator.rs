//! Compiling a spec into a [`Validator`] and validating requests and
//! responses with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value};

use crate::param::{self, check_collected, decode_text, show, In, Layout, Param, Shape};
use crate::router::{parse_template, Captures, Router};
use crate::schema::{Direction, SchemaCheck};
use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};
use crate::{
    Headers, Outcome, Request, ResponseOutcome, UnknownOperation, ValidatorOptions, Violations,
};

/// Operation keys of a Path Item, in the order `Allow` lists them.
const METHODS: [(&str, &str); 8] = [
    ("get", "GET"),
    ("put", "PUT"),
    ("post", "POST"),
    ("delete", "DELETE"),
    ("options", "OPTIONS"),
    ("head", "HEAD"),
    ("patch", "PATCH"),
    ("trace", "TRACE"),
];

fn method_index(method: &str) -> Option<usize> {
    Some(match method {
        "GET" => 0,
        "PUT" => 1,
        "POST" => 2,
        "DELETE" => 3,
        "OPTIONS" => 4,
        "HEAD" => 5,
        "PATCH" => 6,
        "TRACE" => 7,
        _ => return None,
    })
}

/// Tells validators apart, so that an [`OperationRef`] is only honoured by
/// the validator that made it.
static NEXT_STAMP: AtomicU32 = AtomicU32::new(0);

/// A compiled spec: validates requests (and, with
/// [`ValidatorOptions::validate_responses`], responses) against it. Cheap
/// to share between threads (`Send + Sync`); build once at startup.
#[derive(Debug)]
pub struct Validator {
    router: Router,
    paths: Vec<PathEntry>,
    operations: Vec<Operation>,
    stamp: u32,
    base_path: Option<Box<[u8]>>,
    unknown: UnknownOperation,
    max_body_bytes: usize,
    warnings: Vec<String>,
}

#[derive(Debug)]
struct PathEntry {
    template: Box<str>,
    /// Index into `operations`, per method of [`METHODS`].
    operations: [Option<usize>; 8],
    allow: Box<str>,
}

#[derive(Debug)]
struct Operation {
    template: Box<str>,
    operation_id: Option<Box<str>>,
    /// By template expression, in template order; `None`: not declared.
    path: Vec<Option<Param>>,
    query: Vec<Param>,
    query_collects: bool,
    headers: Vec<Param>,
    cookies: Vec<Param>,
    body: Option<BodyRule>,
    /// A `HEAD` operation: its responses have no body.
    head: bool,
    /// `None`: responses are not validated, or the operation declares none.
    responses: Option<Responses>,
}

/// The compiled `responses` of an operation.
#[derive(Debug, Default)]
struct Responses {
    /// By exact status code.
    exact: Vec<(u16, ResponseRule)>,
    /// `1XX` to `5XX`.
    ranges: [Option<ResponseRule>; 5],
    default: Option<ResponseRule>,
    /// `200, 4XX, default`
    declared: Box<str>,
}

impl Responses {
    /// The response declared for `status`: exact code, then range, then `default`.
    fn find(&self, status: u16) -> Option<&ResponseRule> {
        if let Some((_, rule)) = self.exact.iter().find(|(code, _)| *code == status) {
            return Some(rule);
        }
        let class = usize::from(status / 100);
        class
            .checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .and_then(Option::as_ref)
            .or(self.default.as_ref())
    }
}

#[derive(Debug)]
struct ResponseRule {
    /// Empty: the response declares no content.
    media: Vec<MediaRule>,
    /// `application/json, text/plain`
    declared: Box<str>,
    /// Some media type has a schema check.
    wants_body: bool,
}

#[derive(Debug)]
struct BodyRule {
    required: bool,
    media: Vec<MediaRule>,
    /// `application/json, text/plain`
    accepted: Box<str>,
    needs_body: bool,
}

#[derive(Debug)]
struct MediaRule {
    /// Lower case; `*` for wildcards.
    main: Box<str>,
    sub: Box<str>,
    /// The schema check, for JSON bodies.
    check: Option<SchemaCheck>,
}

/// A request matched to an operation: validate its parts from here.
#[derive(Debug, Clone, Copy)]
pub struct Matched<'v, 'r> {
    validator: &'v Validator,
    operation: &'v Operation,
    index: u32,
    path: &'r [u8],
    captures: Captures,
}

/// A matched operation, as a small `Copy` handle without lifetimes: keep it
/// from the request to its response, then pass it to
/// [`Validator::validate_response`]. Only the validator that made it
/// honours it; with any other one nothing is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationRef {
    validator: u32,
    index: u32,
}

impl Validator {
    /// Compiles `spec`. Fails on what cannot be compiled (bad `$ref`s,
    /// cycles, unsupported parameter locations, bad patterns, duplicate
    /// templates); what is compiled but only partly checked is listed in
    /// [`Validator::warnings`].
    ///
    /// Only local `$ref`s (`#/components/...`, or any JSON pointer into the
    /// document) are followed. OpenAPI 3.0 schemas are translated to JSON
    /// Schema 2020-12: `nullable: true` adds `"null"` to `type` (and to
    /// `enum`); boolean `exclusiveMinimum`/`exclusiveMaximum` become the
    /// numeric forms; `format: int32`/`int64` on integers become ranges;
    /// `readOnly` properties are dropped from `required`; `example`,
    /// `discriminator`, `xml`, `externalDocs`, `deprecated` and `x-*` are
    /// dropped; siblings of `$ref` are ignored. In responses `readOnly`
    /// properties stay required and `writeOnly` ones are dropped from
    /// `required` instead. OpenAPI 3.1 schemas are used as written.
    ///
    /// Responses are compiled only with
    /// [`ValidatorOptions::validate_responses`]; each schema is compiled
    /// once however many operations and statuses refer to it.
    pub fn new(spec: &Spec, options: ValidatorOptions) -> Result<Validator, SpecError> {
        let base_path = match options
            .base_path
            .as_deref()
            .map(|b| b.trim_end_matches('/'))
        {
            None | Some("") => None,
            Some(base) if base.starts_with('/') => Some(base.as_bytes().into()),
            Some(base) => {
                return Err(SpecError::new(
                    spec.origin(),
                    None,
                    format!("base_path `{base}` must start with `/`"),
                ))
            }
        };
        let mut compiler = Compiler {
            spec,
            validate_formats: options.validate_formats,
            validate_responses: options.validate_responses,
            warnings: Vec::new(),
            schemas: HashMap::new(),
        };
        let mut validator = Validator {
            router: Router::default(),
            paths: Vec::new(),
            operations: Vec::new(),
            stamp: NEXT_STAMP.fetch_add(1, Ordering::Relaxed),
            base_path,
            unknown: options.unknown_operation,
            max_body_bytes: options.max_body_bytes,
            warnings: Vec::new(),
        };
        if let Some(Value::Object(paths)) = spec.document().get("paths") {
            for (template, item) in paths {
                if template.starts_with("x-") {
                    continue;
                }
                compiler.path_item(&mut validator, template, item)?;
            }
        }
        validator.warnings = compiler.warnings;
        Ok(validator)
    }

    /// What the spec has that is only partly checked (object parameters,
    /// non-JSON bodies with schemas, undeclared path parameters, ...), one
    /// line each, formatted like [`SpecError`].
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Validates a whole request (parameters and, when present, body).
    pub fn validate<'v>(&'v self, request: &Request<'_>) -> Outcome<'v> {
        match self.match_operation(request.method, request.path) {
            Ok(matched) => matched.validate(request),
            Err(outcome) => outcome,
        }
    }

    /// Finds the operation for `method` and the raw `path`; `Err` holds the
    /// outcome when there is none ([`Outcome::NoSuchPath`],
    /// [`Outcome::MethodNotAllowed`], or [`Outcome::Unmatched`] with
    /// [`UnknownOperation::Pass`]).
    pub fn match_operation<'v, 'r>(
        &'v self,
        method: &str,
        path: &'r [u8],
    ) -> Result<Matched<'v, 'r>, Outcome<'v>> {
        let unmatched = |outcome| match self.unknown {
            UnknownOperation::NotFound => outcome,
            UnknownOperation::Pass => Outcome::Unmatched,
        };
        // Captures index `path` after the base path is removed; that is the
        // path `Matched` keeps.
        let path = match &self.base_path {
            None => path,
            Some(base) => match path.strip_prefix(base.as_ref()) {
                Some(b"") => b"/",
                Some(rest) if rest.starts_with(b"/") => rest,
                _ => return Err(unmatched(Outcome::NoSuchPath)),
            },
        };
        let Some((route, captures)) = self.router.find(path) else {
            return Err(unmatched(Outcome::NoSuchPath));
        };
        let entry = &self.paths[route];
        let Some(operation) = method_index(method).and_then(|m| entry.operations[m]) else {
            return Err(unmatched(Outcome::MethodNotAllowed {
                allow: &entry.allow,
            }));
        };
        Ok(Matched {
            validator: self,
            operation: &self.operations[operation],
            // Operations are counted while compiling: at most one per
            // method of each path, far below u32::MAX.
            index: u32::try_from(operation).unwrap_or(u32::MAX),
            path,
            captures,
        })
    }

    /// The operation for `method` and the raw `path`, as a handle to keep
    /// until the response ([`Matched::operation_ref`]); `None` when the spec
    /// has no such operation.
    pub fn operation_ref(&self, method: &str, path: &[u8]) -> Option<OperationRef> {
        self.match_operation(method, path)
            .ok()
            .map(|m| m.operation_ref())
    }

    /// The path template of the operation `op` (`/v1/pets/{petId}`);
    /// `None` for a handle from another validator.
    pub fn template(&self, op: OperationRef) -> Option<&str> {
        self.operation_at(op).map(|o| &*o.template)
    }

    /// The `operationId` of the operation `op`, if it has one.
    pub fn operation_id(&self, op: OperationRef) -> Option<&str> {
        self.operation_at(op)?.operation_id.as_deref()
    }

    fn operation_at(&self, op: OperationRef) -> Option<&Operation> {
        if op.validator != self.stamp {
            return None;
        }
        self.operations.get(usize::try_from(op.index).ok()?)
    }

    /// A response with this `status` and `Content-Type` to the operation
    /// `op` has a JSON schema to check: buffer its body and pass it to
    /// [`Validator::validate_response`]. False when responses are not
    /// validated ([`ValidatorOptions::validate_responses`]), for statuses
    /// the spec does not declare, for media types without a JSON schema,
    /// and for responses that have no body (`HEAD`, 1xx, 204, 304).
    pub fn response_wants_body(
        &self,
        op: OperationRef,
        status: u16,
        content_type: Option<&[u8]>,
    ) -> bool {
        let Some(operation) = self.operation_at(op) else {
            return false;
        };
        let Some(rule) = operation.responses.as_ref().and_then(|r| r.find(status)) else {
            return false;
        };
        if !rule.wants_body || operation.head || bodiless_status(status) {
            return false;
        }
        let content_type = content_type.unwrap_or(b"application/octet-stream");
        is_json(content_type)
            && media_rule(&rule.media, content_type).is_some_and(|m| m.check.is_some())
    }

    /// Validates a response to the operation `op`: its `status`, its
    /// `Content-Type` and, when buffered, its `body` (`None` with a
    /// `content_type`: a body that was not buffered, so only its media type
    /// is checked; `None` without one, or `Some(b"")`: no body).
    ///
    /// The response is looked up by exact status, then by range (`2XX`),
    /// then `default`. A status found nowhere is
    /// [`ResponseOutcome::Undeclared`]; a media type the response does not
    /// declare is [`ResponseOutcome::UnsupportedMediaType`]; a missing body
    /// where content is declared (except for `HEAD`, 1xx, 204 and 304) and
    /// a JSON body that breaks its schema are [`ResponseOutcome::Invalid`],
    /// pointers starting with `/body`. Responses whose body the spec does
    /// not describe (no `content`, non-JSON media types) are `Valid`, as is
    /// everything for an operation without `responses`, with responses not
    /// compiled ([`ValidatorOptions::validate_responses`] off), or for a
    /// handle from another validator. Response headers are not checked.
    ///
    /// A valid response allocates nothing beyond the `serde_json::Value`
    /// its JSON body is parsed into.
    pub fn validate_response(
        &self,
        op: OperationRef,
        status: u16,
        content_type: Option<&[u8]>,
        body: Option<&[u8]>,
    ) -> ResponseOutcome<'_> {
        let Some(operation) = self.operation_at(op) else {
            return ResponseOutcome::Valid;
        };
        let Some(responses) = &operation.responses else {
            return ResponseOutcome::Valid;
        };
        let Some(rule) = responses.find(status) else {
            return ResponseOutcome::Undeclared {
                declared: &responses.declared,
            };
        };
        if rule.media.is_empty() {
            return ResponseOutcome::Valid;
        }
        let present = match body {
            Some(bytes) => !bytes.is_empty(),
            None => content_type.is_some(),
        };
        let mut out = Violations::default();
        if present {
            let content_type = content_type.unwrap_or(b"application/octet-stream");
            let Some(media) = media_rule(&rule.media, content_type) else {
                return ResponseOutcome::UnsupportedMediaType {
                    declared: &rule.declared,
                };
            };
            if let (Some(check), Some(bytes)) = (&media.check, body) {
                if is_json(content_type) {
                    check_json(check, bytes, &mut out);
                }
            }
        } else if !operation.head && !bodiless_status(status) {
            out.add(
                "/body",
                None,
                format!(
                    "a response body ({}) is declared but none was sent",
                    rule.declared
                ),
            );
        }
        if out.is_empty() {
            ResponseOutcome::Valid
        } else {
            ResponseOutcome::Invalid(out.into_vec())
        }
    }

    /// Whether a request for `method` and `path` needs its body buffered
    /// for validation (see [`Matched::needs_body`]); false when there is no
    /// such operation.
    pub fn needs_body(&self, method: &str, path: &[u8]) -> bool {
        self.match_operation(method, path)
            .is_ok_and(|m| m.needs_body())
    }
}

impl<'v> Matched<'v, '_> {
    /// A `Copy` handle to the operation, for [`Validator::validate_response`].
    pub fn operation_ref(&self) -> OperationRef {
        OperationRef {
            validator: self.validator.stamp,
            index: self.index,
        }
    }

    /// The operation's `operationId`.
    pub fn operation_id(&self) -> Option<&'v str> {
        self.operation.operation_id.as_deref()
    }

    /// The path template as written in the spec (`/v1/pets/{petId}`), e.g.
    /// for a metrics label.
    pub fn template(&self) -> &'v str {
        &self.operation.template
    }

    /// The operation has a request body whose content is checked (a JSON
    /// media type with a schema): buffer the body and pass it. Otherwise
    /// the body is not looked at and need not be buffered.
    pub fn needs_body(&self) -> bool {
        self.operation.body.as_ref().is_some_and(|b| b.needs_body)
    }

    /// Validates parameters and body together.
    pub fn validate(&self, request: &Request<'_>) -> Outcome<'v> {
        let mut out = Violations::default();
        self.check_parameters(request, &mut out);
        let early = self.check_body(request.content_type, request.body, &mut out);
        self.finish(early, out)
    }

    /// Validates the parameters, and the `Content-Type` against the media
    /// types the operation accepts, without the body: a proxy can answer
    /// before it reads the body.
    pub fn validate_head(&self, request: &Request<'_>) -> Outcome<'v> {
        let mut out = Violations::default();
        self.check_parameters(request, &mut out);
        let early = match (&self.operation.body, request.content_type) {
            (Some(rule), Some(content_type)) => match media_rule(&rule.media, content_type) {
                Some(_) => None,
                None => Some(Outcome::UnsupportedMediaType {
                    accepted: &rule.accepted,
                }),
            },
            _ => None,
        };
        self.finish(early, out)
    }

    /// Validates the body alone (see [`Request::body`] for what `None` means).
    pub fn validate_body(&self, content_type: Option<&[u8]>, body: Option<&[u8]>) -> Outcome<'v> {
        let mut out = Violations::default();
        let early = self.check_body(content_type, body, &mut out);
        self.finish(early, out)
    }

    fn finish(&self, early: Option<Outcome<'v>>, mut out: Violations) -> Outcome<'v> {
        match early {
            Some(Outcome::UnsupportedMediaType { accepted }) if !out.is_empty() => {
                out.add(
                    "/header/content-type",
                    None,
                    format!("is not one of the accepted media types ({accepted})"),
                );
            }
            Some(outcome) => return outcome,
            None => {}
        }
        if out.is_empty() {
            Outcome::Valid {
                operation_id: self.operation_id(),
            }
        } else {
            Outcome::Invalid(out.into_vec())
        }
    }

    fn check_parameters(&self, request: &Request<'_>, out: &mut Violations) {
        let operation = self.operation;
        for (i, slot) in operation.path.iter().enumerate() {
            let Some(param) = slot else { continue };
            let Some(&(start, end)) = self
                .captures
                .ranges
                .get(i)
                .filter(|_| i < self.captures.len)
            else {
                continue;
            };
            let raw = self
                .path
                .get(start as usize..end as usize)
                .unwrap_or_default();
            let mut state = State::default();
            match decode_text(raw, false) {
                Ok(value) => state.occurrence(param, &value, out),
                Err(why) => out.add(&param.pointer, None, format!("value {why}")),
            }
            state.finish(param, out);
        }
        if !operation.query.is_empty() {
            check_query(operation, request.query, out);
        }
        for param in &operation.headers {
            check_header(param, request.headers, out);
        }
        for param in &operation.cookies {
            check_cookie(param, request.headers, out);
        }
    }

    /// Checks the body; `Some` for outcomes that are not a list of violations.
    fn check_body(
        &self,
        content_type: Option<&[u8]>,
        body: Option<&[u8]>,
        out: &mut Violations,
    ) -> Option<Outcome<'v>> {
        let rule = self.operation.body.as_ref()?;
        let present = match body {
            Some(bytes) => !bytes.is_empty(),
            None => content_type.is_some(),
        };
        if !present {
            if rule.required {
                out.add("/body", None, "a request body is required".to_owned());
            }
            return None;
        }
        if let Some(bytes) = body {
            if bytes.len() > self.validator.max_body_bytes {
                return Some(Outcome::PayloadTooLarge {
                    limit: self.validator.max_body_bytes,
                });
            }
        }
        let content_type = content_type.unwrap_or(b"application/octet-stream");
        let Some(media) = media_rule(&rule.media, content_type) else {
            return Some(Outcome::UnsupportedMediaType {
                accepted: &rule.accepted,
            });
        };
        let (Some(check), Some(bytes)) = (&media.check, body) else {
            return None;
        };
        if is_json(content_type) {
            check_json(check, bytes, out);
        }
        None
    }
}

/// Parses a JSON body and checks it, pointers under `/body`.
fn check_json(check: &SchemaCheck, bytes: &[u8], out: &mut Violations) {
    // serde_json stops at 128 levels of nesting ("recursion limit
    // exceeded"), so a hostile body cannot overflow the stack here, in
    // jsonschema, or when the value is dropped.
    match serde_json::from_slice::<Value>(bytes) {
        Ok(instance) => check.check(&instance, "/body", out),
        Err(e) => out.add("/body", None, format!("is not valid JSON: {e}")),
    }
}

/// Statuses whose responses have no body (RFC 9110): 1xx, 204 and 304.
fn bodiless_status(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// The essence (`type/subtype`) of a `Content-Type` value, trimmed.
fn essence(content_type: &[u8]) -> (&[u8], &[u8]) {
    let end = content_type
        .iter()
        .position(|&b| b == b';')
        .unwrap_or(content_type.len());
    let essence = content_type[..end].trim_ascii();
    match essence.iter().position(|&b| b == b'/') {
        Some(slash) => (
            essence[..slash].trim_ascii(),
            essence[slash + 1..].trim_ascii(),
        ),
        None => (essence, b""),
    }
}

fn is_json(content_type: &[u8]) -> bool {
    let (main, sub) = essence(content_type);
    main.eq_ignore_ascii_case(b"application")
        && (sub.eq_ignore_ascii_case(b"json") || ends_with_ignore_case(sub, b"+json"))
}

fn ends_with_ignore_case(text: &[u8], suffix: &[u8]) -> bool {
    text.len() > suffix.len() && text[text.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// The most specific media rule for a `Content-Type`.
fn media_rule<'r>(rules: &'r [MediaRule], content_type: &[u8]) -> Option<&'r MediaRule> {
    let (main, sub) = essence(content_type);
    let mut best: Option<(u8, &MediaRule)> = None;
    for media in rules {
        let same_main = media.main.as_bytes().eq_ignore_ascii_case(main);
        let rank = if same_main && media.sub.as_bytes().eq_ignore_ascii_case(sub) {
            4
        } else if same_main
            && media.sub.starts_with("*+")
            && ends_with_ignore_case(sub, &media.sub.as_bytes()[1..])
        {
            // `application/*+json`
            3
        } else if same_main && &*media.sub == "*" {
            2
        } else if &*media.main == "*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(r, _)| rank > r) {
            best = Some((rank, media));
        }
    }
    best.map(|(_, media)| media)
}

/// Per-parameter bookkeeping while its occurrences are checked.
#[derive(Default)]
struct State {
    occurrences: u32,
    items: u64,
    collected: Vec<String>,
}

impl State {
    /// Checks one occurrence of `param` with the (decoded) `value`.
    fn occurrence(&mut self, param: &Param, value: &str, out: &mut Violations) {
        let nth = self.occurrences;
        self.occurrences += 1;
        // Header arrays may continue over several field lines; exploded
        // query arrays occur once per item; anything else occurs once.
        let lists_across_fields = param.location == In::Header;
        let repeatable = match param.shape.layout() {
            None => false,
            Some(layout) => lists_across_fields || layout == Layout::Exploded,
        };
        let repeated = nth > 0 && !repeatable;
        if repeated {
            if nth == 1 {
                out.add(&param.pointer, None, "must not be repeated".to_owned());
            }
            return;
        }
        if value.is_empty() && param.allow_empty {
            return;
        }
        let collects = param.shape.collects();
        match &param.shape {
            Shape::Scalar(scalar) => scalar.check(value, &param.pointer, None, out),
            Shape::Array { items, layout, .. } => {
                let mut each = |item: &str, out: &mut Violations| {
                    let item = if lists_across_fields {
                        item.trim_ascii()
                    } else {
                        item
                    };
                    items.check(item, &param.pointer, Some(self.items as usize), out);
                    self.items += 1;
                    if collects {
                        self.collected.push(item.to_owned());
                    }
                };
                match layout {
                    Layout::Exploded => each(value, out),
                    Layout::Delimited(_) if value.is_empty() => {}
                    Layout::Delimited(d) => {
                        for item in param::split_items(value, *d) {
                            each(item, out);
                        }
                    }
                }
            }
            Shape::Schema { layout, .. } => match layout {
                Some(Layout::Delimited(_)) if value.is_empty() => {}
                Some(Layout::Delimited(d)) => {
                    for item in param::split_items(value, *d) {
                        let item = if lists_across_fields {
                            item.trim_ascii()
                        } else {
                            item
                        };
                        self.collected.push(item.to_owned());
                    }
                }
                _ => self.collected.push(value.to_owned()),
            },
            Shape::Json(check) => match serde_json::from_str::<Value>(value) {
                Ok(instance) => check.check(&instance, &param.pointer, out),
                Err(e) => out.add(
                    &param.pointer,
                    None,
                    format!("{} is not valid JSON: {e}", show(value)),
                ),
            },
            Shape::Unchecked => {}
        }
    }

    /// The checks after every occurrence was seen.
    fn finish(self, param: &Param, out: &mut Violations) {
        if self.occurrences == 0 {
            if param.required {
                out.add(
                    &param.pointer,
                    None,
                    "a required parameter is missing".to_owned(),
                );
            }
            return;
        }
        finish_items(param, self.items, out);
        if param.shape.collects() && !(self.collected.is_empty() && param.shape.layout().is_none())
        {
            check_collected(param, &self.collected, out);
        }
    }
}

fn check_query(operation: &Operation, query: Option<&[u8]>, out: &mut Violations) {
    let params = &operation.query;
    let mut states: Vec<State> = Vec::new();
    let mut counts_small = [0u32; 16];
    let use_states = operation.query_collects || params.len() > counts_small.len();
    if use_states {
        states = params.iter().map(|_| State::default()).collect();
    }
    // Without collecting parameters a State is just counters: keep those on
    // the stack and build the State for the one parameter being checked.
    for pair in query.unwrap_or_default().split(|&b| b == b'&') {
        if pair.is_empty() {
            continue;
        }
        let (raw_name, raw_value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &b""[..]),
        };
        let Some(index) = find_param(params, raw_name) else {
            continue;
        };
        let param = &params[index];
        let value = match decode_text(raw_value, true) {
            Ok(value) => value,
            Err(why) => {
                out.add(&param.pointer, None, format!("value {why}"));
                continue;
            }
        };
        if use_states {
            states[index].occurrence(param, &value, out);
        } else {
            let nth = counts_small[index];
            let mut state = State {
                occurrences: nth,
                items: u64::from(nth),
                collected: Vec::new(),
            };
            state.occurrence(param, &value, out);
            counts_small[index] = state.occurrences;
            if let Shape::Array {
                layout: Layout::Delimited(_),
                ..
            } = param.shape
            {
                // A delimited array occurs once; its item count is checked here.
                if nth == 0 {
                    finish_items(param, state.items, out);
                }
            }
        }
    }
    if use_states {
        for (param, state) in params.iter().zip(states) {
            state.finish(param, out);
        }
    } else {
        for (param, &count) in params.iter().zip(&counts_small) {
            if count == 0 {
                if param.required {
                    out.add(
                        &param.pointer,
                        None,
                        "a required parameter is missing".to_owned(),
                    );
                }
            } else if let Shape::Array {
                layout: Layout::Exploded,
                ..
            } = param.shape
            {
                finish_items(param, u64::from(count), out);
            }
        }
    }
}

/// The `minItems` / `maxItems` checks of an array parameter.
fn finish_items(param: &Param, items: u64, out: &mut Violations) {
    if items == 0 && param.allow_empty {
        return;
    }
    if let Shape::Array {
        min_items,
        max_items,
        ..
    } = &param.shape
    {
        if let Some(min) = *min_items {
            if items < min {
                out.add(
                    &param.pointer,
                    None,
                    format!("has {items} items, fewer than {min}"),
                );
            }
        }
        if let Some(max) = *max_items {
            if items > max {
                out.add(
                    &param.pointer,
                    None,
                    format!("has {items} items, more than {max}"),
                );
            }
        }
    }
}

/// The declared query parameter a raw name refers to.
fn find_param(params: &[Param], raw_name: &[u8]) -> Option<usize> {
    if !raw_name.iter().any(|&b| b == b'%' || b == b'+') {
        return params.iter().position(|p| p.name.as_bytes() == raw_name);
    }
    let name = decode_text(raw_name, true).ok()?;
    params.iter().position(|p| *p.name == *name)
}

fn check_header(param: &Param, headers: Headers<'_>, out: &mut Violations) {
    let mut state = State::default();
    for (name, value) in headers.iter() {
        if !name.eq_ignore_ascii_case(param.name.as_bytes()) {
            continue;
        }
        match std::str::from_utf8(value) {
            Ok(value) => state.occurrence(param, value.trim_ascii(), out),
            Err(_) => {
                state.occurrences += 1;
                out.add(&param.pointer, None, "value is not valid UTF-8".to_owned());
            }
        }
    }
    state.finish(param, out);
}

fn check_cookie(param: &Param, headers: Headers<'_>, out: &mut Violations) {
    let mut state = State::default();
    for (name, value) in headers.iter() {
        if !name.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        for pair in value.split(|&b| b == b';') {
            let pair = pair.trim_ascii();
            let (cookie_name, cookie_value) = match pair.iter().position(|&b| b == b'=') {
                Some(eq) => (&pair[..eq], &pair[eq + 1..]),
                None => continue,
            };
            if cookie_name != param.name.as_bytes() {
                continue;
            }
            match std::str::from_utf8(cookie_value) {
                Ok(value) => state.occurrence(param, value, out),
                Err(_) => {
                    state.occurrences += 1;
                    out.add(&param.pointer, None, "value is not valid UTF-8".to_owned());
                }
            }
        }
    }
    state.finish(param, out);
}

// ---------------------------------------------------------------------------
// Compiling

struct Compiler<'s> {
    spec: &'s Spec,
    validate_formats: bool,
    validate_responses: bool,
    warnings: Vec<String>,
    /// Compiled body schemas by (dereferenced) pointer: a schema that many
    /// operations refer to is compiled once per direction.
    schemas: HashMap<(String, Direction), SchemaCheck>,
}

impl Compiler<'_> {
    fn warn(&mut self, pointer: &str, message: impl std::fmt::Display) {
        let line = format!("{}: #{pointer}: {message}", self.spec.origin());
        // A shared request body or response reports its warnings once.
        if !self.warnings.contains(&line) {
            self.warnings.push(line);
        }
    }

    fn path_item(
        &mut self,
        validator: &mut Validator,
        template: &str,
        item: &Value,
    ) -> Result<(), SpecError> {
        let spec = self.spec;
        let at = pointer_push("/paths", template);
        let parsed = parse_template(template).map_err(|e| spec.error(&at, e))?;
        let (item, item_at) = spec.deref(item, &at)?;
        let item_object = item
            .as_object()
            .ok_or_else(|| spec.error(&item_at, "a path item must be an object"))?;
        let common = param_list(
            spec,
            item_object.get("parameters"),
            &pointer_push(&item_at, "parameters"),
        )?;
        let mut entry = PathEntry {
            template: template.into(),
            operations: [None; 8],
            allow: Box::default(),
        };
        let mut allow: Vec<&str> = Vec::new();
        for (m, (key, upper)) in METHODS.iter().enumerate() {
            let Some(operation) = item_object.get(*key) else {
                continue;
            };
            let op_at = pointer_push(&item_at, key);
            let compiled =
                self.operation(template, key, &parsed.names, operation, &op_at, &common)?;
            entry.operations[m] = Some(validator.operations.len());
            validator.operations.push(compiled);
            allow.push(upper);
        }
        if allow.is_empty() {
            return Ok(());
        }
        entry.allow = allow.join(", ").into();
        let route = validator.paths.len();
        validator.router.insert(&parsed, route).map_err(|other| {
            spec.error(
                &at,
                format!("same path shape as `{}` (templated paths that differ only in names are identical)", validator.paths[other].template),
            )
        })?;
        validator.paths.push(entry);
        Ok(())
    }

    fn operation(
        &mut self,
        template: &str,
        method: &str,
        names: &[String],
        operation: &Value,
        at: &str,
        common: &[(&Value, String)],
    ) -> Result<Operation, SpecError> {
        let spec = self.spec;
        let object = operation
            .as_object()
            .ok_or_else(|| spec.error(at, "an operation must be an object"))?;
        let own = param_list(
            spec,
            object.get("parameters"),
            &pointer_push(at, "parameters"),
        )?;
        // Operation parameters override path-item ones with the same name and location.
        let mut all: Vec<(&Value, String)> = own.clone();
        for (param, param_at) in common {
            if !own.iter().any(|(p, _)| same_param(p, param)) {
                all.push((param, param_at.clone()));
            }
        }
        let mut compiled = Operation {
            template: template.into(),
            operation_id: object
                .get("operationId")
                .and_then(Value::as_str)
                .map(Into::into),
            path: names.iter().map(|_| None).collect(),
            query: Vec::new(),
            query_collects: false,
            headers: Vec::new(),
            cookies: Vec::new(),
            body: None,
            head: method == "head",
            responses: None,
        };
        for (param, param_at) in &all {
            let param::Compiled { param, warning } =
                param::compile(spec, param, param_at, self.validate_formats)?;
            if let Some(warning) = warning {
                self.warnings.push(warning);
            }
            match param.location {
                In::Path => match names.iter().position(|n| **n == *param.name) {
                    Some(i) => compiled.path[i] = Some(param),
                    None => self.warn(
                        param_at,
                        format!(
                            "path parameter `{}` is not in the path template; ignored",
                            param.name
                        ),
                    ),
                },
                In::Query => {
                    compiled.query_collects |= param.shape.collects();
                    compiled.query.push(param);
                }
                In::Header => {
                    if !["accept", "content-type", "authorization"]
                        .iter()
                        .any(|n| n.eq_ignore_ascii_case(&param.name))
                    {
                        compiled.headers.push(param);
                    }
                }
                In::Cookie => compiled.cookies.push(param),
            }
        }
        for (name, slot) in names.iter().zip(&compiled.path) {
            if slot.is_none() {
                self.warn(at, format!("path parameter `{{{name}}}` is not declared; any non-empty value is accepted"));
            }
        }
        if let Some(body) = object.get("requestBody") {
            compiled.body = Some(self.request_body(body, &pointer_push(at, "requestBody"))?);
        }
        if self.validate_responses {
            if let Some(responses) = object.get("responses") {
                compiled.responses = self.responses(responses, &pointer_push(at, "responses"))?;
            }
        }
        Ok(compiled)
    }

    fn responses(&mut self, responses: &Value, at: &str) -> Result<Option<Responses>, SpecError> {
        let spec = self.spec;
        let (responses, responses_at) = spec.deref(responses, at)?;
        let object = responses
            .as_object()
            .ok_or_else(|| spec.error(&responses_at, "`responses` must be an object"))?;
        let mut compiled = Responses::default();
        for (key, response) in object {
            if key.starts_with("x-") {
                continue;
            }
            let response_at = pointer_push(&responses_at, key);
            let bytes = key.as_bytes();
            let slot = if key == "default" {
                &mut compiled.default
            } else if let [class @ b'1'..=b'5', b'X' | b'x', b'X' | b'x'] = bytes {
                &mut compiled.ranges[usize::from(class - b'1')]
            } else if let Some(code) = key
                .parse::<u16>()
                .ok()
                .filter(|c| bytes.len() == 3 && (100..600).contains(c))
            {
                let rule = self.response(response, &response_at)?;
                compiled.exact.push((code, rule));
                continue;
            } else {
                return Err(spec.error(
                    &response_at,
                    format!("`{key}` is not a status code (`200`), a range (`2XX`) or `default`"),
                ));
            };
            if slot.is_some() {
                return Err(spec.error(&response_at, format!("`{key}` is declared twice")));
            }
            *slot = Some(self.response(response, &response_at)?);
        }
        // `200, 404, 4XX, default`, whatever the order in the spec.
        compiled.exact.sort_by_key(|(code, _)| *code);
        let mut declared: Vec<String> = compiled
            .exact
            .iter()
            .map(|(code, _)| code.to_string())
            .collect();
        for (class, range) in (1..).zip(&compiled.ranges) {
            if range.is_some() {
                declared.push(format!("{class}XX"));
            }
        }
        if compiled.default.is_some() {
            declared.push("default".to_owned());
        }
        if declared.is_empty() {
            return Ok(None);
        }
        compiled.declared = declared.join(", ").into();
        Ok(Some(compiled))
    }

    fn response(&mut self, response: &Value, at: &str) -> Result<ResponseRule, SpecError> {
        let spec = self.spec;
        let (response, response_at) = spec.deref(response, at)?;
        if !response.is_object() {
            return Err(spec.error(&response_at, "a response must be an object"));
        }
        let content_at = pointer_push(&response_at, "content");
        let (media, declared) = match response.get("content") {
            None => (Vec::new(), Vec::new()),
            Some(Value::Object(content)) => {
                self.content(content, &content_at, Direction::Response)?
            }
            Some(_) => return Err(spec.error(&content_at, "`content` must be an object")),
        };
        let wants_body = media.iter().any(|m| m.check.is_some());
        Ok(ResponseRule {
            media,
            declared: declared.join(", ").into(),
            wants_body,
        })
    }

    fn request_body(&mut self, body: &Value, at: &str) -> Result<BodyRule, SpecError> {
        let spec = self.spec;
        let (body, body_at) = spec.deref(body, at)?;
        let required = match body.get("required") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(spec.error(
                    &pointer_push(&body_at, "required"),
                    "`required` must be a boolean",
                ))
            }
        };
        let content_at = pointer_push(&body_at, "content");
        let content = body
            .get("content")
            .and_then(Value::as_object)
            .ok_or_else(|| spec.error(&content_at, "a request body needs a `content` object"))?;
        let (media, accepted) = self.content(content, &content_at, Direction::Request)?;
        let needs_body = media.iter().any(|m| m.check.is_some());
        Ok(BodyRule {
            required,
            media,
            accepted: accepted.join(", ").into(),
            needs_body,
        })
    }

    /// The media rules of a `content` map, and the essences it declares.
    fn content(
        &mut self,
        content: &Map<String, Value>,
        content_at: &str,
        direction: Direction,
    ) -> Result<(Vec<MediaRule>, Vec<String>), SpecError> {
        let spec = self.spec;
        let mut media = Vec::with_capacity(content.len());
        let mut accepted = Vec::with_capacity(content.len());
        for (key, media_type) in content {
            let media_at = pointer_push(content_at, key);
            let essence = key
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            let Some((main, sub)) = essence.split_once('/') else {
                return Err(spec.error(&media_at, format!("`{key}` is not a media type")));
            };
            accepted.push(essence.clone());
            let json_capable = (main == "application"
                && (sub == "json" || sub.ends_with("+json") || sub == "*"))
                || main == "*";
            let check = match media_type.get("schema") {
                None => None,
                Some(_) if !json_capable => {
                    let what = match direction {
                        Direction::Request => "bodies",
                        Direction::Response => "response bodies",
                    };
                    self.warn(
                        &media_at,
                        format!("`{key}` {what} are not checked against their schema"),
                    );
                    None
                }
                Some(_) => self.schema_check(&pointer_push(&media_at, "schema"), direction)?,
            };
            media.push(MediaRule {
                main: main.into(),
                sub: sub.into(),
                check,
            });
        }
        Ok((media, accepted))
    }

    /// The check for the body schema at `at`; `None` when it accepts
    /// anything. Compiled once per schema and direction.
    fn schema_check(
        &mut self,
        at: &str,
        direction: Direction,
    ) -> Result<Option<SchemaCheck>, SpecError> {
        let key = (self.canonical_schema(at)?, direction);
        let check = match self.schemas.get(&key) {
            Some(check) => check.clone(),
            None => {
                let check =
                    SchemaCheck::compile(self.spec, &key.0, self.validate_formats, direction)?;
                self.schemas.insert(key, check.clone());
                check
            }
        };
        Ok(match check {
            SchemaCheck::Any => None,
            check => Some(check),
        })
    }

    /// Where the schema at `at` really is: follows schemas that are only a
    /// `$ref` (in OpenAPI 3.0 any `$ref`, whose siblings are ignored), so
    /// that a component used by many operations has one pointer. Stops
    /// early on anything odd and leaves it to the schema compiler to report.
    fn canonical_schema(&self, at: &str) -> Result<String, SpecError> {
        let spec = self.spec;
        let v30 = spec.version() == OpenApiVersion::V3_0;
        let mut at = at.to_owned();
        for _ in 0..16 {
            let Some(object) = spec.lookup(&at).and_then(Value::as_object) else {
                break;
            };
            let Some(reference) = object.get("$ref").and_then(Value::as_str) else {
                break;
            };
            if !v30 && object.len() != 1 {
                break;
            }
            let target = spec.ref_target(reference, &pointer_push(&at, "$ref"))?;
            if target == at
                || target.is_empty()
                || target == "/allOf"
                || target.starts_with("/allOf/")
            {
                break;
            }
            at = target;
        }
        Ok(at)
    }
}

/// The dereferenced Parameter Objects of a `parameters` list, with their pointers.
fn param_list<'s>(
    spec: &'s Spec,
    list: Option<&'s Value>,
    at: &str,
) -> Result<Vec<(&'s Value, String)>, SpecError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let items = list
        .as_array()
        .ok_or_else(|| spec.error(at, "`parameters` must be an array"))?;
    let mut out: Vec<(&Value, String)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let (param, param_at) = spec.deref(item, &pointer_push(at, &i.to_string()))?;
        if let Some((_, first)) = out.iter().find(|(p, _)| same_param(p, param)) {
            return Err(spec.error(&param_at, format!("duplicate parameter (also at #{first})")));
        }
        out.push((param, param_at));
    }
    Ok(out)
}

fn same_param(a: &Value, b: &Value) -> bool {
    let key = |p: &Value| {
        (
            p.get("name")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase),
            p.get("in").and_then(Value::as_str).map(str::to_owned),
        )
    };
    let (name_a, in_a) = key(a);
    let (name_b, in_b) = key(b);
    in_a == in_b
        && match in_a.as_deref() {
            Some("header") => name_a == name_b,
            _ => a.get("name") == b.get("name"),
        }
}
