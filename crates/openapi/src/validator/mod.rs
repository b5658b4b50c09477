//! The compiled spec, [`Validator`]: matching a request to its operation
//! (base path, path template, method), then handing its parts to the
//! request and response checks.
//!
//! Modules, each using only those listed before it (tests aside: they
//! borrow `compile` to build operations): `model` (the compiled form),
//! `media` (media types), `occurrence` and `request` (request checks),
//! `response` (response checks), `compile` (with its `bodies`) (spec to
//! model).

mod compile;
mod media;
mod model;
mod occurrence;
mod request;
mod response;

use std::sync::atomic::{AtomicU32, Ordering};

use crate::router::{Captures, Router};
use crate::spec::{Spec, SpecError};
use crate::{Outcome, Request, ResponseOutcome, UnknownOperation, ValidatorOptions, Violations};
use compile::compile;
use media::media_rule;
use model::{method_index, CompiledSpec, Operation, PathEntry};

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
        let CompiledSpec {
            router,
            paths,
            operations,
            warnings,
        } = compile(spec, options.validate_formats, options.validate_responses)?;
        Ok(Validator {
            router,
            paths,
            operations,
            stamp: NEXT_STAMP.fetch_add(1, Ordering::Relaxed),
            base_path,
            unknown: options.unknown_operation,
            max_body_bytes: options.max_body_bytes,
            warnings,
        })
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
        self.operation_at(op)
            .is_some_and(|operation| response::response_wants_body(operation, status, content_type))
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
        match self.operation_at(op) {
            Some(operation) => response::validate_response(operation, status, content_type, body),
            None => ResponseOutcome::Valid,
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
        request::check_parameters(self.operation, self.path, &self.captures, request, out);
    }

    fn check_body(
        &self,
        content_type: Option<&[u8]>,
        body: Option<&[u8]>,
        out: &mut Violations,
    ) -> Option<Outcome<'v>> {
        let rule = self.operation.body.as_ref()?;
        request::check_body(rule, self.validator.max_body_bytes, content_type, body, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
openapi: 3.0.3
info: { title: t, version: "1" }
paths:
  /pets/{id}:
    parameters: [ { name: id, in: path, required: true, schema: { type: integer } } ]
    get: { operationId: showPet }
    delete: {}
  /pets/mine:
    get: { operationId: mine }
"#;

    fn validator(options: ValidatorOptions) -> Validator {
        Validator::new(&Spec::from_str(SPEC, "t.yaml").unwrap(), options).unwrap()
    }

    /// The template and the captured text of a match, or the outcome
    /// (`Debug`) when there is none.
    type Found = Result<(String, Vec<String>), String>;

    fn matched(validator: &Validator, method: &str, path: &str) -> Found {
        match validator.match_operation(method, path.as_bytes()) {
            Ok(m) => {
                let captures = m.captures.ranges[..m.captures.len]
                    .iter()
                    .map(|&(start, end)| &m.path[start as usize..end as usize])
                    .map(|text| String::from_utf8_lossy(text).into_owned())
                    .collect();
                Ok((m.template().to_owned(), captures))
            }
            Err(outcome) => Err(format!("{outcome:?}")),
        }
    }

    fn found(template: &str, captures: &[&str]) -> Found {
        let captures = captures.iter().map(|c| c.to_string()).collect();
        Ok((template.to_owned(), captures))
    }

    fn none(outcome: &str) -> Found {
        Err(outcome.to_owned())
    }

    #[test]
    fn a_template_matches_one_segment_and_captures_it() {
        let v = validator(ValidatorOptions::default());
        assert_eq!(matched(&v, "GET", "/pets/7"), found("/pets/{id}", &["7"]));
        assert_eq!(matched(&v, "GET", "/pets/7/x"), none("NoSuchPath"));
        assert_eq!(matched(&v, "GET", "/pets/"), none("NoSuchPath"));
        // A literal segment beats a template.
        assert_eq!(matched(&v, "GET", "/pets/mine"), found("/pets/mine", &[]));
        // Methods are case-sensitive.
        for method in ["PUT", "get"] {
            assert_eq!(
                matched(&v, method, "/pets/7"),
                none(r#"MethodNotAllowed { allow: "GET, DELETE" }"#)
            );
        }
    }

    #[test]
    fn the_base_path_is_removed_before_matching() {
        let options = ValidatorOptions {
            base_path: Some("/api/".to_owned()),
            ..ValidatorOptions::default()
        };
        let v = validator(options);
        assert_eq!(
            matched(&v, "GET", "/api/pets/7"),
            found("/pets/{id}", &["7"])
        );
        assert_eq!(matched(&v, "GET", "/apipets/7"), none("NoSuchPath"));
        assert_eq!(matched(&v, "GET", "/pets/7"), none("NoSuchPath"));
        let bad = ValidatorOptions {
            base_path: Some("api".to_owned()),
            ..ValidatorOptions::default()
        };
        let spec = Spec::from_str(SPEC, "t.yaml").unwrap();
        assert_eq!(
            Validator::new(&spec, bad).unwrap_err().to_string(),
            "t.yaml: base_path `api` must start with `/`"
        );
    }

    #[test]
    fn unknown_operations_pass_when_asked_to() {
        let options = ValidatorOptions {
            unknown_operation: UnknownOperation::Pass,
            ..ValidatorOptions::default()
        };
        let v = validator(options);
        assert_eq!(matched(&v, "GET", "/nope"), none("Unmatched"));
        assert_eq!(matched(&v, "PUT", "/pets/7"), none("Unmatched"));
        let bad_id = Request::new("GET", b"/pets/x");
        let Outcome::Invalid(violations) = v.validate(&bad_id) else {
            panic!("a declared operation is still checked");
        };
        assert_eq!(
            violations[0].to_string(),
            r#"/path/id: "x" is not an integer"#
        );
    }

    #[test]
    fn operation_refs_belong_to_their_validator() {
        let one = validator(ValidatorOptions::default());
        let two = validator(ValidatorOptions::default());
        let op = one.operation_ref("DELETE", b"/pets/1").unwrap();
        assert_eq!(one.template(op), Some("/pets/{id}"));
        assert_eq!(one.operation_id(op), None);
        assert_eq!(two.template(op), None);
        let show = one.operation_ref("GET", b"/pets/1").unwrap();
        assert_eq!(one.operation_id(show), Some("showPet"));
        assert_ne!(op, show);
        assert_eq!(one.operation_ref("GET", b"/nope"), None);
    }
}
