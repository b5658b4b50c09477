//! Parameters: compiled from the spec into hand-written checks for the
//! common primitive shapes, or into a JSON Schema check on a coerced value
//! for the rest.

use std::cmp::Ordering;

use regex::Regex;
use serde_json::{Map, Value};

use crate::schema::{truncate_chars, Direction, SchemaCheck, ECHO_CHARS};
use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};
pub(crate) use crate::text::decode_text;
use crate::{Violation, Violations};

/// A value shown in a message: quoted, escaped like Rust's `{:?}`, and cut
/// (with `…`) once the escaped text reaches [`ECHO_CHARS`] characters.
pub(crate) fn show(value: &str) -> String {
    let mut out = String::with_capacity(ECHO_CHARS + 8);
    out.push('"');
    let mut shown = 0;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\'' {
            shown += 1;
            out.push(c);
        } else {
            let escaped = c.escape_debug();
            shown += escaped.len();
            out.extend(escaped);
        }
        if shown >= ECHO_CHARS {
            if !chars.as_str().is_empty() {
                out.push('…');
            }
            break;
        }
    }
    out.push('"');
    out
}

/// Where a parameter lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum In {
    Path,
    Query,
    Header,
    Cookie,
}

impl In {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "path" => Some(Self::Path),
            "query" => Some(Self::Query),
            "header" => Some(Self::Header),
            "cookie" => Some(Self::Cookie),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
            Self::Cookie => "cookie",
        }
    }
}

/// One compiled parameter.
#[derive(Debug)]
pub(crate) struct Param {
    pub(crate) name: Box<str>,
    pub(crate) location: In,
    /// `/query/limit`: the violation pointer.
    pub(crate) pointer: Box<str>,
    pub(crate) required: bool,
    /// `allowEmptyValue`: an empty query value is accepted as is.
    pub(crate) allow_empty: bool,
    pub(crate) shape: Shape,
}

/// How the occurrences of an array parameter are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One occurrence per item (`?id=1&id=2`: query `form`, `explode: true`).
    Exploded,
    /// One occurrence, items separated by this byte.
    Delimited(u8),
}

/// What is checked on a parameter's value.
#[derive(Debug)]
pub(crate) enum Shape {
    /// A primitive (integer, number, string, boolean), checked by hand.
    Scalar(Scalar),
    /// An array of primitives, checked by hand.
    Array {
        items: Scalar,
        layout: Layout,
        min_items: Option<u64>,
        max_items: Option<u64>,
        unique: bool,
    },
    /// A schema too rich for the hand checks: the value is coerced to JSON
    /// (numbers, booleans, strings by the schema's types) and checked with
    /// `jsonschema`.
    Schema {
        check: SchemaCheck,
        /// `Some` for arrays.
        layout: Option<Layout>,
        types: Types,
    },
    /// `content: application/json`: the value is a JSON document.
    Json(SchemaCheck),
    /// Presence only (object parameters, `deepObject`, non-JSON content).
    Unchecked,
}

impl Shape {
    /// The value(s) must be collected before checking.
    pub(crate) fn collects(&self) -> bool {
        matches!(self, Self::Schema { .. } | Self::Array { unique: true, .. })
    }

    pub(crate) fn layout(&self) -> Option<Layout> {
        match self {
            Self::Array { layout, .. } => Some(*layout),
            Self::Schema { layout, .. } => *layout,
            _ => None,
        }
    }
}

/// A set of primitive JSON types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    const BOOLEAN: Types = Types(1);
    const INTEGER: Types = Types(2);
    const NUMBER: Types = Types(4);
    const STRING: Types = Types(8);
    const ANY: Types = Types(15);
    const NONE: Types = Types(0);

    fn has(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    fn describe(self) -> &'static str {
        match self.0 {
            1 => "a boolean",
            2 => "an integer",
            4 | 6 => "a number",
            8 => "a string",
            _ => "a value of the declared types",
        }
    }
}

/// A lower or upper bound.
#[derive(Debug, Clone, Copy)]
struct Bound {
    limit: f64,
    exclusive: bool,
}

/// The hand-checked rules for one primitive value.
#[derive(Debug)]
pub(crate) struct Scalar {
    types: Types,
    /// `format: int32` (32) or `int64` (64).
    int_bits: u8,
    lower: Option<Bound>,
    upper: Option<Bound>,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Regex>,
    options: Option<Box<[Value]>>,
}

impl Scalar {
    fn any() -> Self {
        Self {
            types: Types::ANY,
            int_bits: 0,
            lower: None,
            upper: None,
            multiple_of: None,
            min_length: None,
            max_length: None,
            pattern: None,
            options: None,
        }
    }

    /// Checks one value; violations get `pointer` (plus `/index` for array
    /// items).
    pub(crate) fn check(
        &self,
        value: &str,
        pointer: &str,
        index: Option<usize>,
        out: &mut Violations,
    ) {
        let before = out.len();
        let types = self.types;
        if types.has(Types::BOOLEAN) && (value == "true" || value == "false") {
            // A boolean.
        } else if types.has(Types::INTEGER) && is_integer(value) {
            self.check_integer(value, pointer, index, out);
        } else if types.has(Types::NUMBER) && is_number(value) {
            self.check_number(value, pointer, index, out);
        } else if types.has(Types::STRING) {
            self.check_string(value, pointer, index, out);
        } else {
            out.add(
                pointer,
                index,
                format!("{} is not {}", show(value), types.describe()),
            );
            return;
        }
        if out.len() == before {
            if let Some(options) = &self.options {
                if !options.iter().any(|option| enum_matches(option, value)) {
                    out.add(
                        pointer,
                        index,
                        format!("{} is not one of {}", show(value), list_options(options)),
                    );
                }
            }
        }
    }

    fn check_integer(
        &self,
        value: &str,
        pointer: &str,
        index: Option<usize>,
        out: &mut Violations,
    ) {
        match value.parse::<i64>() {
            Ok(n) => {
                if self.int_bits == 32 && i32::try_from(n).is_err() {
                    out.add(
                        pointer,
                        index,
                        format!("{} is out of range for int32", show(value)),
                    );
                    return;
                }
                if let Some(bound) = self.lower {
                    if !satisfies(cmp_int(n, bound.limit), bound.exclusive, Ordering::Greater) {
                        out.add(pointer, index, lower_message(value, bound));
                    }
                }
                if let Some(bound) = self.upper {
                    if !satisfies(cmp_int(n, bound.limit), bound.exclusive, Ordering::Less) {
                        out.add(pointer, index, upper_message(value, bound));
                    }
                }
                if let Some(m) = self.multiple_of {
                    let ok = if m.fract() == 0.0 && m.abs() < 9.0e18 {
                        (m as i64) == 0 || n % (m as i64) == 0
                    } else {
                        is_multiple(n as f64, m)
                    };
                    if !ok {
                        out.add(
                            pointer,
                            index,
                            format!("{} is not a multiple of {m}", show(value)),
                        );
                    }
                }
            }
            Err(_) => {
                // Beyond i64.
                if self.int_bits != 0 {
                    out.add(
                        pointer,
                        index,
                        format!("{} is out of range for int{}", show(value), self.int_bits),
                    );
                    return;
                }
                let n = value.parse::<f64>().unwrap_or(f64::NAN);
                self.check_float_bounds(n, value, pointer, index, out);
            }
        }
    }

    fn check_number(&self, value: &str, pointer: &str, index: Option<usize>, out: &mut Violations) {
        let n = value.parse::<f64>().unwrap_or(f64::NAN);
        if !n.is_finite() {
            out.add(pointer, index, format!("{} is out of range", show(value)));
            return;
        }
        self.check_float_bounds(n, value, pointer, index, out);
        if let Some(m) = self.multiple_of {
            if !is_multiple(n, m) {
                out.add(
                    pointer,
                    index,
                    format!("{} is not a multiple of {m}", show(value)),
                );
            }
        }
    }

    fn check_float_bounds(
        &self,
        n: f64,
        value: &str,
        pointer: &str,
        index: Option<usize>,
        out: &mut Violations,
    ) {
        if let Some(bound) = self.lower {
            let ord = n.partial_cmp(&bound.limit).unwrap_or(Ordering::Less);
            if !satisfies(ord, bound.exclusive, Ordering::Greater) {
                out.add(pointer, index, lower_message(value, bound));
            }
        }
        if let Some(bound) = self.upper {
            let ord = n.partial_cmp(&bound.limit).unwrap_or(Ordering::Greater);
            if !satisfies(ord, bound.exclusive, Ordering::Less) {
                out.add(pointer, index, upper_message(value, bound));
            }
        }
    }

    fn check_string(&self, value: &str, pointer: &str, index: Option<usize>, out: &mut Violations) {
        if self.min_length.is_some() || self.max_length.is_some() {
            let length = value.chars().count() as u64;
            if let Some(min) = self.min_length {
                if length < min {
                    out.add(
                        pointer,
                        index,
                        format!(
                            "{} is shorter than {min} character{}",
                            show(value),
                            plural(min)
                        ),
                    );
                }
            }
            if let Some(max) = self.max_length {
                if length > max {
                    out.add(
                        pointer,
                        index,
                        format!(
                            "{} is longer than {max} character{}",
                            show(value),
                            plural(max)
                        ),
                    );
                }
            }
        }
        if let Some(pattern) = &self.pattern {
            if !pattern.is_match(value) {
                out.add(
                    pointer,
                    index,
                    format!("{} does not match {}", show(value), show(pattern.as_str())),
                );
            }
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn lower_message(value: &str, bound: Bound) -> String {
    if bound.exclusive {
        format!(
            "{} is less than or equal to the exclusive minimum of {}",
            show(value),
            bound.limit
        )
    } else {
        format!(
            "{} is less than the minimum of {}",
            show(value),
            bound.limit
        )
    }
}

fn upper_message(value: &str, bound: Bound) -> String {
    if bound.exclusive {
        format!(
            "{} is greater than or equal to the exclusive maximum of {}",
            show(value),
            bound.limit
        )
    } else {
        format!(
            "{} is greater than the maximum of {}",
            show(value),
            bound.limit
        )
    }
}

/// `ord` is the value compared with the bound; `want` the side it must be on.
fn satisfies(ord: Ordering, exclusive: bool, want: Ordering) -> bool {
    ord == want || (!exclusive && ord == Ordering::Equal)
}

/// Compares an integer with a bound exactly when the bound is integral.
fn cmp_int(n: i64, limit: f64) -> Ordering {
    if limit.fract() == 0.0 && (-9.2e18..=9.2e18).contains(&limit) {
        n.cmp(&(limit as i64))
    } else {
        (n as f64).partial_cmp(&limit).unwrap_or(Ordering::Less)
    }
}

fn is_multiple(n: f64, m: f64) -> bool {
    if m == 0.0 {
        return true;
    }
    let q = n / m;
    q.is_finite() && (q - q.round()).abs() < 1e-9
}

/// `-?[0-9]+`
fn is_integer(value: &str) -> bool {
    let digits = value.strip_prefix('-').unwrap_or(value).as_bytes();
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// JSON number syntax (leading zeros allowed).
fn is_number(value: &str) -> bool {
    let mut bytes = value.strip_prefix('-').unwrap_or(value).as_bytes();
    let int_len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if int_len == 0 {
        return false;
    }
    bytes = &bytes[int_len..];
    if let Some(rest) = bytes.strip_prefix(b".") {
        let frac_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if frac_len == 0 {
            return false;
        }
        bytes = &rest[frac_len..];
    }
    if let Some(rest) = bytes
        .strip_prefix(b"e")
        .or_else(|| bytes.strip_prefix(b"E"))
    {
        let rest = rest
            .strip_prefix(b"+")
            .or_else(|| rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        let exp_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if exp_len == 0 {
            return false;
        }
        bytes = &rest[exp_len..];
    }
    bytes.is_empty()
}

fn enum_matches(option: &Value, value: &str) -> bool {
    match option {
        Value::String(s) => s == value,
        Value::Number(n) => is_number(value) && value.parse::<f64>().ok() == n.as_f64(),
        Value::Bool(b) => value == if *b { "true" } else { "false" },
        _ => false,
    }
}

fn list_options(options: &[Value]) -> String {
    let mut shown: Vec<String> = options
        .iter()
        .filter(|o| !o.is_null())
        .take(4)
        .map(|o| match o {
            Value::String(s) => show(s),
            other => truncate_chars(&other.to_string(), ECHO_CHARS),
        })
        .collect();
    if options.len() > 4 {
        shown.push(format!("… ({} in all)", options.len()));
    }
    format!("[{}]", shown.join(", "))
}

/// Coerces one textual value to JSON for a [`Shape::Schema`] check.
pub(crate) fn coerce(value: &str, types: Types) -> Value {
    if types.has(Types::INTEGER) && is_integer(value) {
        if let Ok(n) = value.parse::<i64>() {
            return Value::from(n);
        }
    }
    if types.has(Types::NUMBER | Types::INTEGER) && is_number(value) {
        if let Some(n) = value
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Value::Number(n);
        }
    }
    if types.has(Types::BOOLEAN) && (value == "true" || value == "false") {
        return Value::Bool(value == "true");
    }
    Value::String(value.to_owned())
}

impl std::ops::BitOr for Types {
    type Output = Types;
    fn bitor(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }
}

impl Violations {
    /// Adds a violation at `pointer` (plus `/index`).
    pub(crate) fn add(&mut self, pointer: &str, index: Option<usize>, message: String) {
        let pointer = match index {
            Some(i) => format!("{pointer}/{i}"),
            None => pointer.to_owned(),
        };
        self.push(Violation { pointer, message });
    }
}

// ---------------------------------------------------------------------------
// Compiling

/// Schema keywords the hand checks understand (or may ignore).
const SCALAR_KEYS: &[&str] = &[
    "type",
    "format",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "nullable",
    "default",
    "description",
    "title",
    "example",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "xml",
    "externalDocs",
];
const ARRAY_KEYS: &[&str] = &["items", "minItems", "maxItems", "uniqueItems"];

/// What compiling a parameter gives: the parameter and maybe a warning.
pub(crate) struct Compiled {
    pub(crate) param: Param,
    pub(crate) warning: Option<String>,
}

/// Compiles the (already dereferenced) Parameter Object `param` found at `at`.
pub(crate) fn compile(
    spec: &Spec,
    param: &Value,
    at: &str,
    validate_formats: bool,
) -> Result<Compiled, SpecError> {
    let object = param
        .as_object()
        .ok_or_else(|| spec.error(at, "a parameter must be an object"))?;
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| spec.error(at, "a parameter needs a string `name`"))?;
    let location_text = object
        .get("in")
        .and_then(Value::as_str)
        .ok_or_else(|| spec.error(at, "a parameter needs `in` (path, query, header or cookie)"))?;
    let location = In::parse(location_text).ok_or_else(|| {
        let hint = if matches!(location_text, "body" | "formData") {
            " (Swagger 2.0; OpenAPI 3 uses `requestBody`)"
        } else {
            ""
        };
        spec.error(
            &pointer_push(at, "in"),
            format!("unsupported `in: {location_text}`{hint}"),
        )
    })?;
    let required = match object.get("required") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(spec.error(
                &pointer_push(at, "required"),
                "`required` must be a boolean",
            ))
        }
    };
    if location == In::Path && !required {
        return Err(spec.error(
            &pointer_push(at, "required"),
            "a path parameter must be `required: true`",
        ));
    }
    let allow_empty =
        location == In::Query && object.get("allowEmptyValue") == Some(&Value::Bool(true));
    let pointer_name = if location == In::Header {
        name.to_ascii_lowercase()
    } else {
        name.to_owned()
    };
    let pointer = pointer_push(&format!("/{}", location.as_str()), &pointer_name);
    let mut warning = None;
    let shape = match (object.get("schema"), object.get("content")) {
        (Some(_), Some(_)) => {
            return Err(spec.error(at, "a parameter has either `schema` or `content`, not both"));
        }
        (None, None) => return Err(spec.error(at, "a parameter needs `schema` or `content`")),
        (None, Some(content)) => compile_content(
            spec,
            content,
            &pointer_push(at, "content"),
            validate_formats,
            &mut warning,
        )?,
        (Some(schema), None) => {
            let style = object.get("style").and_then(Value::as_str);
            let explode = object.get("explode").and_then(Value::as_bool);
            let layout = match layout(location, style, explode) {
                Ok(layout) => layout,
                Err(why) => {
                    warning = Some(format!(
                        "{}: #{at}: {why}; only its presence is checked",
                        spec.origin()
                    ));
                    return Ok(Compiled {
                        param: Param {
                            name: name.into(),
                            location,
                            pointer: pointer.into(),
                            required,
                            allow_empty,
                            shape: Shape::Unchecked,
                        },
                        warning,
                    });
                }
            };
            compile_schema(
                spec,
                schema,
                &pointer_push(at, "schema"),
                layout,
                validate_formats,
                &mut warning,
            )?
        }
    };
    Ok(Compiled {
        param: Param {
            name: name.into(),
            location,
            pointer: pointer.into(),
            required,
            allow_empty,
            shape,
        },
        warning,
    })
}

/// The array layout for a style; `Err` names what is not supported.
fn layout(location: In, style: Option<&str>, explode: Option<bool>) -> Result<Layout, String> {
    match (
        location,
        style.unwrap_or(match location {
            In::Query | In::Cookie => "form",
            In::Path | In::Header => "simple",
        }),
    ) {
        (In::Query | In::Cookie, "form") => {
            Ok(if explode.unwrap_or(true) && location == In::Query {
                Layout::Exploded
            } else {
                Layout::Delimited(b',')
            })
        }
        (In::Query, "spaceDelimited") => Ok(Layout::Delimited(b' ')),
        (In::Query, "pipeDelimited") => Ok(Layout::Delimited(b'|')),
        (In::Path | In::Header, "simple") => Ok(Layout::Delimited(b',')),
        (_, style) => Err(format!(
            "`style: {style}` is not supported for {} parameters",
            location.as_str()
        )),
    }
}

fn compile_content(
    spec: &Spec,
    content: &Value,
    at: &str,
    validate_formats: bool,
    warning: &mut Option<String>,
) -> Result<Shape, SpecError> {
    let map = content
        .as_object()
        .ok_or_else(|| spec.error(at, "`content` must be an object"))?;
    let Some((media, body)) = map.iter().next() else {
        return Err(spec.error(at, "`content` must name one media type"));
    };
    let media_at = pointer_push(at, media);
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence != "application/json" && !essence.ends_with("+json") {
        *warning = Some(format!(
            "{}: #{media_at}: `{media}` parameters are not validated; only their presence is checked",
            spec.origin()
        ));
        return Ok(Shape::Unchecked);
    }
    match body.get("schema") {
        Some(schema) => {
            let (_, target) = spec.deref(schema, &pointer_push(&media_at, "schema"))?;
            Ok(Shape::Json(SchemaCheck::compile(
                spec,
                &target,
                validate_formats,
                Direction::Request,
            )?))
        }
        None => Ok(Shape::Json(SchemaCheck::Any)),
    }
}

fn compile_schema(
    spec: &Spec,
    schema: &Value,
    at: &str,
    layout: Layout,
    validate_formats: bool,
    warning: &mut Option<String>,
) -> Result<Shape, SpecError> {
    let (resolved, resolved_at) = resolve_schema(spec, schema, at)?;
    let types = declared_types(spec, resolved, &resolved_at, 0);
    if types.1 == Kind::Object {
        *warning = Some(format!(
            "{}: #{at}: object parameters are not validated; only their presence is checked",
            spec.origin()
        ));
        return Ok(Shape::Unchecked);
    }
    if types.1 == Kind::Array {
        if let Some(object) = resolved.as_object().filter(|o| simple(o, true)) {
            let items_at = pointer_push(&resolved_at, "items");
            let items = match object.get("items") {
                Some(items) => {
                    let (items, items_at) = resolve_schema(spec, items, &items_at)?;
                    items
                        .as_object()
                        .filter(|o| simple(o, false))
                        .map(|o| scalar(spec, o, &items_at))
                        .transpose()?
                }
                None => Some(Scalar::any()),
            };
            if let Some(items) = items {
                return Ok(Shape::Array {
                    items,
                    layout,
                    min_items: object.get("minItems").and_then(Value::as_u64),
                    max_items: object.get("maxItems").and_then(Value::as_u64),
                    unique: object.get("uniqueItems") == Some(&Value::Bool(true)),
                });
            }
        }
        let item_types = match resolved.get("items") {
            Some(items) => {
                let (items, items_at) =
                    resolve_schema(spec, items, &pointer_push(&resolved_at, "items"))?;
                declared_types(spec, items, &items_at, 0).0
            }
            None => Types::STRING,
        };
        return Ok(Shape::Schema {
            check: SchemaCheck::compile(spec, &resolved_at, validate_formats, Direction::Request)?,
            layout: Some(layout),
            types: item_types,
        });
    }
    if let Some(object) = resolved.as_object().filter(|o| simple(o, false)) {
        return Ok(Shape::Scalar(scalar(spec, object, &resolved_at)?));
    }
    if resolved == &Value::Bool(true) {
        return Ok(Shape::Scalar(Scalar::any()));
    }
    Ok(Shape::Schema {
        check: SchemaCheck::compile(spec, &resolved_at, validate_formats, Direction::Request)?,
        layout: None,
        types: types.0,
    })
}

/// Follows `$ref`s when the schema is a pure reference (3.0 always; 3.1
/// when the `$ref` has no constraining siblings).
fn resolve_schema<'s>(
    spec: &'s Spec,
    schema: &'s Value,
    at: &str,
) -> Result<(&'s Value, String), SpecError> {
    let pure = spec.version() == OpenApiVersion::V3_0
        || schema.as_object().is_some_and(|o| {
            o.keys()
                .all(|k| matches!(k.as_str(), "$ref" | "description" | "summary" | "title"))
        });
    if pure {
        spec.deref(schema, at)
    } else {
        Ok((schema, at.to_owned()))
    }
}

/// Only keywords the hand checks handle.
fn simple(object: &Map<String, Value>, array: bool) -> bool {
    object.keys().all(|k| {
        SCALAR_KEYS.contains(&k.as_str())
            || (array && ARRAY_KEYS.contains(&k.as_str()))
            || k.starts_with("x-")
    }) && match object.get("type") {
        None => !array,
        Some(Value::String(t)) => (t == "array") == array,
        Some(Value::Array(list)) => list.iter().all(|t| {
            matches!(
                t.as_str(),
                Some("integer" | "number" | "string" | "boolean" | "null")
            ) || (array && t.as_str() == Some("array"))
        }),
        Some(_) => false,
    } && match object.get("pattern") {
        None => true,
        Some(p) => p.is_string(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Primitive,
    Array,
    Object,
}

/// The primitive types a schema admits (for coercion) and its kind,
/// looking through `allOf`/`anyOf`/`oneOf` a few levels deep.
fn declared_types(spec: &Spec, schema: &Value, at: &str, depth: usize) -> (Types, Kind) {
    let mut types = Types::NONE;
    let mut kind = Kind::Primitive;
    let mut add = |name: &str, types: &mut Types| match name {
        "integer" => *types = *types | Types::INTEGER,
        "number" => *types = *types | Types::NUMBER,
        "string" => *types = *types | Types::STRING,
        "boolean" => *types = *types | Types::BOOLEAN,
        "array" => kind = Kind::Array,
        "object" => kind = Kind::Object,
        _ => {}
    };
    match schema.get("type") {
        Some(Value::String(t)) => add(t, &mut types),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .for_each(|t| add(t, &mut types)),
        _ => {}
    }
    if depth < 4 {
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = schema.get(key) {
                for (i, member) in list.iter().enumerate() {
                    let member_at = pointer_push(&pointer_push(at, key), &i.to_string());
                    if let Ok((member, member_at)) = spec.deref(member, &member_at) {
                        let (t, k) = declared_types(spec, member, &member_at, depth + 1);
                        types = types | t;
                        if k != Kind::Primitive {
                            kind = k;
                        }
                    }
                }
            }
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            if let Ok(target_at) = spec.ref_target(reference, at) {
                if let Some(target) = spec.lookup(&target_at) {
                    let (t, k) = declared_types(spec, target, &target_at, depth + 1);
                    types = types | t;
                    if k != Kind::Primitive {
                        kind = k;
                    }
                }
            }
        }
    }
    if types == Types::NONE {
        types = Types::STRING;
    }
    (types, kind)
}

/// Compiles a simple schema object into hand checks.
fn scalar(spec: &Spec, object: &Map<String, Value>, at: &str) -> Result<Scalar, SpecError> {
    let mut types = Types::NONE;
    match object.get("type") {
        None => types = Types::ANY,
        Some(Value::String(t)) => types = types_of(t),
        Some(Value::Array(list)) => {
            for t in list.iter().filter_map(Value::as_str) {
                types = types | types_of(t);
            }
        }
        Some(_) => {}
    }
    let number = |key: &str| -> Result<Option<f64>, SpecError> {
        match object.get(key) {
            None | Some(Value::Bool(_)) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(spec.error(&pointer_push(at, key), format!("`{key}` must be a number"))),
        }
    };
    let count = |key: &str| -> Result<Option<u64>, SpecError> {
        match object.get(key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                spec.error(
                    &pointer_push(at, key),
                    format!("`{key}` must be a non-negative integer"),
                )
            }),
        }
    };
    // minimum with 3.0's boolean exclusiveMinimum, or 3.1's numeric one; the stricter wins.
    let bound = |inclusive_key: &str,
                 exclusive_key: &str,
                 lower: bool|
     -> Result<Option<Bound>, SpecError> {
        let inclusive = number(inclusive_key)?;
        let flag = object
            .get(exclusive_key)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let first = inclusive.map(|limit| Bound {
            limit,
            exclusive: flag,
        });
        let second = number(exclusive_key)?.map(|limit| Bound {
            limit,
            exclusive: true,
        });
        Ok(match (first, second) {
            (Some(a), Some(b)) => {
                let b_stricter = if lower {
                    b.limit >= a.limit
                } else {
                    b.limit <= a.limit
                };
                Some(if b_stricter { b } else { a })
            }
            (a, b) => a.or(b),
        })
    };
    let pattern = match object.get("pattern").and_then(Value::as_str) {
        None => None,
        Some(p) => Some(Regex::new(p).map_err(|e| {
            spec.error(
                &pointer_push(at, "pattern"),
                format!(
                    "pattern does not compile: {}",
                    truncate_chars(&e.to_string(), 200)
                ),
            )
        })?),
    };
    let options = match (object.get("enum"), object.get("const")) {
        (Some(Value::Array(list)), _) => Some(list.clone().into_boxed_slice()),
        (Some(_), _) => {
            return Err(spec.error(&pointer_push(at, "enum"), "`enum` must be an array"))
        }
        (None, Some(value)) => Some(vec![value.clone()].into_boxed_slice()),
        (None, None) => None,
    };
    Ok(Scalar {
        types,
        int_bits: match object.get("format").and_then(Value::as_str) {
            Some("int32") => 32,
            Some("int64") => 64,
            _ => 0,
        },
        lower: bound("minimum", "exclusiveMinimum", true)?,
        upper: bound("maximum", "exclusiveMaximum", false)?,
        multiple_of: number("multipleOf")?,
        min_length: count("minLength")?,
        max_length: count("maxLength")?,
        pattern,
        options,
    })
}

fn types_of(name: &str) -> Types {
    match name {
        "integer" => Types::INTEGER,
        "number" => Types::NUMBER | Types::INTEGER,
        "string" => Types::STRING,
        "boolean" => Types::BOOLEAN,
        _ => Types::NONE,
    }
}

/// Splits a delimited value; items are trimmed of spaces for header values.
pub(crate) fn split_items(value: &str, delimiter: u8) -> impl Iterator<Item = &str> {
    value.split(char::from(delimiter))
}

/// Makes the final check of a collected parameter: uniqueness of array
/// items, or the JSON Schema check of the coerced value.
pub(crate) fn check_collected(param: &Param, values: &[String], out: &mut Violations) {
    match &param.shape {
        Shape::Array { unique: true, .. } => {
            let mut seen = std::collections::HashSet::with_capacity(values.len());
            if let Some(value) = values.iter().find(|v| !seen.insert(v.as_str())) {
                out.add(
                    &param.pointer,
                    None,
                    format!("has non-unique items ({} repeats)", show(value)),
                );
            }
        }
        Shape::Schema {
            check,
            layout,
            types,
        } => {
            let instance = match layout {
                Some(_) => Value::Array(values.iter().map(|v| coerce(v, *types)).collect()),
                None => match values.first() {
                    Some(v) => coerce(v, *types),
                    None => return,
                },
            };
            check.check(&instance, &param.pointer, out);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_syntax() {
        for ok in ["0", "-1", "007", "1.5", "-0.25", "1e5", "1E+5", "2.5e-3"] {
            assert!(is_number(ok), "{ok}");
        }
        for bad in [
            "", "-", "+1", ".5", "5.", "1e", "1e+", "0x10", "inf", "NaN", "1 ", " 1", "1.2.3",
        ] {
            assert!(!is_number(bad), "{bad}");
        }
        assert!(is_integer("-12") && is_integer("0012"));
        assert!(!is_integer("1.0") && !is_integer("-") && !is_integer("") && !is_integer("+1"));
    }

    #[test]
    fn integer_bounds_compare_exactly() {
        assert_eq!(cmp_int(i64::MAX, 9.2e18), Ordering::Greater);
        assert_eq!(cmp_int(5, 5.0), Ordering::Equal);
        assert_eq!(cmp_int(5, 5.5), Ordering::Less);
        assert_eq!(cmp_int(-3, -3.5), Ordering::Greater);
        assert!(is_multiple(0.3, 0.1) && !is_multiple(0.35, 0.1));
    }
}
