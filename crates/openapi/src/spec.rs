//! Loading an OpenAPI document and resolving its local `$ref`s.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use serde_json::Value;

/// The OpenAPI major.minor line a document declares in its `openapi` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenApiVersion {
    /// OpenAPI 3.0.x: schemas are the OpenAPI dialect of JSON Schema draft 4
    /// (`nullable`, boolean `exclusiveMinimum`, ...), translated before use.
    V3_0,
    /// OpenAPI 3.1.x: schemas are JSON Schema 2020-12, used as written.
    V3_1,
}

/// A parsed OpenAPI 3.0 or 3.1 document, ready to be compiled by
/// [`Validator::new`](crate::Validator::new).
#[derive(Debug, Clone)]
pub struct Spec {
    origin: String,
    root: Value,
    version: OpenApiVersion,
}

/// Why a spec could not be loaded or compiled: the file, the JSON pointer
/// into the spec where known, and what is wrong.
///
/// Displays as `specs/x.yaml: #/paths/~1v1~1pets/get/parameters/0: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    origin: String,
    pointer: Option<String>,
    message: String,
}

impl SpecError {
    pub(crate) fn new(origin: &str, pointer: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            origin: origin.to_owned(),
            pointer: pointer.map(str::to_owned),
            message: message.into(),
        }
    }

    /// The file name (or the origin name given to [`Spec::from_str`]).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The JSON pointer into the spec (without the leading `#`), when the
    /// fault has a location: `/paths/~1v1~1pets/get/parameters/0`.
    pub fn pointer(&self) -> Option<&str> {
        self.pointer.as_deref()
    }

    /// What is wrong, without the origin and pointer.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pointer {
            Some(pointer) => write!(f, "{}: #{}: {}", self.origin, pointer, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for SpecError {}

impl Spec {
    /// Reads and parses a spec file (YAML or JSON). Errors name the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Spec, SpecError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| SpecError::new(&origin, None, format!("cannot read: {e}")))?;
        Self::from_str(&text, &origin)
    }

    /// Parses a spec from text (YAML, or JSON when it starts with `{`);
    /// `origin` names it in errors (usually the file name).
    pub fn from_str(text: &str, origin: &str) -> Result<Spec, SpecError> {
        let root: Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(text)
                .map_err(|e| SpecError::new(origin, None, format!("invalid JSON: {e}")))?
        } else {
            // YAML 1.2 booleans only: `name: y` is the string "y".
            let options = serde_saphyr::options! { strict_booleans: true, with_snippet: false };
            serde_saphyr::from_str_with_options(text, options)
                .map_err(|e| SpecError::new(origin, None, format!("invalid YAML: {e}")))?
        };
        Self::from_value(root, origin)
    }

    /// Wraps an already parsed document; `origin` names it in errors.
    pub fn from_value(root: Value, origin: &str) -> Result<Spec, SpecError> {
        let Some(object) = root.as_object() else {
            return Err(SpecError::new(
                origin,
                None,
                "the document is not an object",
            ));
        };
        let version = match object.get("openapi") {
            Some(Value::String(v)) if v.starts_with("3.0.") || v == "3.0" => OpenApiVersion::V3_0,
            Some(Value::String(v)) if v.starts_with("3.1.") || v == "3.1" => OpenApiVersion::V3_1,
            Some(v) => {
                return Err(SpecError::new(
                    origin,
                    Some("/openapi"),
                    format!("unsupported OpenAPI version {v} (3.0.x and 3.1.x are supported)"),
                ))
            }
            None if object.contains_key("swagger") => {
                return Err(SpecError::new(
                    origin,
                    Some("/swagger"),
                    "Swagger 2.0 is not supported (convert it to OpenAPI 3)",
                ))
            }
            None => {
                return Err(SpecError::new(
                    origin,
                    Some("/openapi"),
                    "missing `openapi` version field",
                ))
            }
        };
        match object.get("paths") {
            None | Some(Value::Object(_)) => {}
            Some(_) => {
                return Err(SpecError::new(
                    origin,
                    Some("/paths"),
                    "`paths` must be an object",
                ))
            }
        }
        Ok(Spec {
            origin: origin.to_owned(),
            root,
            version,
        })
    }

    /// The origin name used in errors.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The OpenAPI version line the document declares.
    pub fn version(&self) -> OpenApiVersion {
        self.version
    }

    /// The whole document as JSON.
    pub fn document(&self) -> &Value {
        &self.root
    }

    pub(crate) fn error(&self, pointer: &str, message: impl Into<String>) -> SpecError {
        SpecError::new(&self.origin, Some(pointer), message)
    }

    pub(crate) fn lookup(&self, pointer: &str) -> Option<&Value> {
        self.root.pointer(pointer)
    }

    /// Checks a `$ref` string found at `at` and returns the JSON pointer it
    /// names (decoded from its URI-fragment form).
    pub(crate) fn ref_target(&self, reference: &str, at: &str) -> Result<String, SpecError> {
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(self.error(
                at,
                format!("external $ref `{reference}` is not supported (only local `#/...` references are)"),
            ));
        };
        let pointer = percent_decode_fragment(fragment).ok_or_else(|| {
            self.error(
                at,
                format!("$ref `{reference}` is not a valid URI fragment"),
            )
        })?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(self.error(
                at,
                format!("$ref `{reference}` names an anchor; only JSON-pointer references are supported"),
            ));
        }
        if self.lookup(&pointer).is_none() {
            return Err(self.error(at, format!("$ref `{reference}` does not resolve")));
        }
        Ok(pointer.into_owned())
    }

    /// Follows a chain of `$ref`s starting at `value` (found at `at`) to the
    /// object it ends at, with cycle detection. Returns that value and its
    /// pointer.
    pub(crate) fn deref<'s>(
        &'s self,
        value: &'s Value,
        at: &str,
    ) -> Result<(&'s Value, String), SpecError> {
        let mut value = value;
        let mut at = at.to_owned();
        let mut seen: Vec<String> = Vec::new();
        while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
            let target = self.ref_target(reference, &at)?;
            if seen.contains(&target) || target == at {
                seen.push(target);
                let chain: Vec<String> = seen.iter().map(|p| format!("#{p}")).collect();
                return Err(self.error(&at, format!("$ref cycle: {}", chain.join(" -> "))));
            }
            seen.push(target.clone());
            value = self.lookup(&target).unwrap_or(&Value::Null);
            at = target;
        }
        Ok((value, at))
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/`.
pub(crate) fn pointer_push(base: &str, token: &str) -> String {
    let mut out = String::with_capacity(base.len() + token.len() + 1);
    out.push_str(base);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// Decodes `%XX` escapes in a URI fragment; `None` when they are malformed
/// or do not decode to UTF-8.
fn percent_decode_fragment(fragment: &str) -> Option<Cow<'_, str>> {
    if !fragment.contains('%') {
        return Some(Cow::Borrowed(fragment));
    }
    let bytes = crate::text::percent_decode(fragment.as_bytes(), false).ok()?;
    String::from_utf8(bytes.into_owned()).ok().map(Cow::Owned)
}
