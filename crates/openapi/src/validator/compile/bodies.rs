//! Compiling the request bodies and responses of operations: their
//! `content` maps into media rules, each JSON schema compiled once.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::super::model::{BodyRule, MediaRule, ResponseRule, Responses};
use crate::schema::{Direction, SchemaCheck};
use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};

/// Compiles bodies and responses, and keeps the warnings of the whole
/// compilation (the path compiler adds its own here too, so that there is
/// one list in the order found).
pub(super) struct BodyCompiler<'s> {
    pub(super) spec: &'s Spec,
    pub(super) validate_formats: bool,
    pub(super) warnings: Vec<String>,
    /// Compiled body schemas by (dereferenced) pointer: a schema that many
    /// operations refer to is compiled once per direction.
    schemas: HashMap<(String, Direction), SchemaCheck>,
}

impl<'s> BodyCompiler<'s> {
    pub(super) fn new(spec: &'s Spec, validate_formats: bool) -> Self {
        Self {
            spec,
            validate_formats,
            warnings: Vec::new(),
            schemas: HashMap::new(),
        }
    }

    pub(super) fn warn(&mut self, pointer: &str, message: impl std::fmt::Display) {
        let line = format!("{}: #{pointer}: {message}", self.spec.origin());
        // A shared request body or response reports its warnings once.
        if !self.warnings.contains(&line) {
            self.warnings.push(line);
        }
    }

    pub(super) fn responses(
        &mut self,
        responses: &Value,
        at: &str,
    ) -> Result<Option<Responses>, SpecError> {
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

    pub(super) fn request_body(&mut self, body: &Value, at: &str) -> Result<BodyRule, SpecError> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, compiled_paths};
    use crate::schema::SchemaCheck;
    use crate::validator::model::CompiledSpec;

    fn with_responses(responses: serde_json::Value) -> Result<CompiledSpec, String> {
        compiled_paths(json!({ "/a": { "get": { "responses": responses } } }))
    }

    #[test]
    fn statuses_are_listed_codes_then_ranges_then_default() {
        let compiled = with_responses(json!({
            "default": { "description": "d" },
            "4XX": { "description": "r" },
            "404": { "description": "n" },
            "200": { "description": "o" },
            "x-note": 1,
        }))
        .unwrap();
        let responses = compiled.operations[0].responses.as_ref().unwrap();
        assert_eq!(&*responses.declared, "200, 404, 4XX, default");
        assert!(
            with_responses(json!({ "x-only": 1 })).unwrap().operations[0]
                .responses
                .is_none()
        );
    }

    #[test]
    fn bad_responses_are_rejected() {
        assert_eq!(
            with_responses(json!({ "20": {} })).unwrap_err(),
            "t.json: #/paths/~1a/get/responses/20: `20` is not a status code (`200`), a range (`2XX`) or `default`"
        );
        assert_eq!(
            with_responses(json!({ "2XX": {}, "2xx": {} })).unwrap_err(),
            "t.json: #/paths/~1a/get/responses/2xx: `2xx` is declared twice"
        );
        assert_eq!(
            with_responses(json!({ "200": { "content": [] } })).unwrap_err(),
            "t.json: #/paths/~1a/get/responses/200/content: `content` must be an object"
        );
        assert_eq!(
            with_responses(json!({ "200": { "content": { "json": {} } } })).unwrap_err(),
            "t.json: #/paths/~1a/get/responses/200/content/json: `json` is not a media type"
        );
        assert_eq!(
            compiled_paths(json!({ "/a": { "post": { "requestBody": { "required": true } } } }))
                .unwrap_err(),
            "t.json: #/paths/~1a/post/requestBody/content: a request body needs a `content` object"
        );
    }

    #[test]
    fn request_bodies_list_what_they_accept() {
        let compiled = compiled_paths(json!({ "/a": { "post": { "requestBody": { "content": {
            "Application/JSON; charset=utf-8": { "schema": { "type": "object" } },
            "text/plain": { "schema": { "type": "string" } },
        } } } } }))
        .unwrap();
        let body = compiled.operations[0].body.as_ref().unwrap();
        assert!(body.needs_body && !body.required);
        let media: Vec<(&str, &str, bool)> = body
            .media
            .iter()
            .map(|m| (&*m.main, &*m.sub, m.check.is_some()))
            .collect();
        assert_eq!(
            media,
            [("application", "json", true), ("text", "plain", false)]
        );
        assert_eq!(&*body.accepted, "application/json, text/plain");
        assert_eq!(
            compiled.warnings,
            ["t.json: #/paths/~1a/post/requestBody/content/text~1plain: `text/plain` bodies are not checked against their schema"]
        );
    }

    #[test]
    fn a_shared_schema_is_compiled_once() {
        let document = json!({
            "openapi": "3.0.3",
            "paths": { "/a": {
                "post": { "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } } },
                "put": { "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Alias" } } } } },
            } },
            "components": { "schemas": {
                "Pet": { "type": "object" },
                "Alias": { "$ref": "#/components/schemas/Pet" },
            } },
        });
        let spec = crate::Spec::from_value(document, "t.json").unwrap();
        let compiled = compile(&spec, true, false).unwrap();
        let check = |i: usize| match &compiled.operations[i].body.as_ref().unwrap().media[0].check {
            Some(SchemaCheck::Compiled(validator)) => validator.clone(),
            other => panic!("{other:?}"),
        };
        assert!(std::sync::Arc::ptr_eq(&check(0), &check(1)));
    }
}
