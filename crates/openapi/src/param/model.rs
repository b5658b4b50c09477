//! A compiled parameter: where it lives and what is checked on its value.

use serde_json::Value;

use super::scalar::Scalar;
use super::types::{coerce, Types};
use crate::schema::SchemaCheck;
use crate::text::show;
use crate::Violations;

/// Where a parameter lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum In {
    Path,
    Query,
    Header,
    Cookie,
}

impl In {
    pub(super) fn parse(text: &str) -> Option<Self> {
        match text {
            "path" => Some(Self::Path),
            "query" => Some(Self::Query),
            "header" => Some(Self::Header),
            "cookie" => Some(Self::Cookie),
            _ => None,
        }
    }

    pub(super) fn as_str(self) -> &'static str {
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

    fn param(shape: Shape) -> Param {
        Param {
            name: "ids".into(),
            location: In::Query,
            pointer: "/query/ids".into(),
            required: false,
            allow_empty: false,
            shape,
        }
    }

    fn array(unique: bool) -> Shape {
        Shape::Array {
            items: Scalar::any(),
            layout: Layout::Exploded,
            min_items: None,
            max_items: None,
            unique,
        }
    }

    #[test]
    fn locations_read_and_print_as_the_spec_spells_them() {
        for location in [In::Path, In::Query, In::Header, In::Cookie] {
            assert_eq!(In::parse(location.as_str()), Some(location));
        }
        assert_eq!(In::Query.as_str(), "query");
        assert_eq!(In::parse("body"), None);
        assert_eq!(In::parse("Query"), None);
    }

    #[test]
    fn only_unique_arrays_and_schemas_collect() {
        assert!(array(true).collects());
        assert!(!array(false).collects());
        assert_eq!(array(false).layout(), Some(Layout::Exploded));
        assert!(!Shape::Unchecked.collects());
        assert_eq!(Shape::Unchecked.layout(), None);
        let schema = Shape::Schema {
            check: SchemaCheck::Any,
            layout: None,
            types: Types::STRING,
        };
        assert!(schema.collects());
        assert_eq!(schema.layout(), None);
    }

    #[test]
    fn a_repeated_item_is_named_once() {
        let mut out = Violations::default();
        let values = ["1", "2", "1", "2"].map(str::to_owned);
        check_collected(&param(array(true)), &values, &mut out);
        let found = out.into_vec();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/query/ids");
        assert_eq!(found[0].message, r#"has non-unique items ("1" repeats)"#);
        let mut out = Violations::default();
        check_collected(&param(array(true)), &values[..2], &mut out);
        assert!(out.is_empty());
    }
}
