//! The occurrences of one parameter in a request: each checked as it is
//! found, then the checks that need all of them (presence, item counts,
//! uniqueness, the JSON Schema check of a collected value).

use serde_json::Value;

use crate::param::{check_collected, split_items, In, Layout, Param, Shape};
use crate::text::show;
use crate::Violations;

/// Per-parameter bookkeeping while its occurrences are checked.
#[derive(Default)]
pub(super) struct Occurrences {
    /// How many times the parameter occurred.
    pub(super) count: u32,
    /// How many array items were seen, over every occurrence.
    pub(super) items: u64,
    /// The values (or items) kept for the checks that need them all.
    pub(super) collected: Vec<String>,
}

impl Occurrences {
    /// Checks one occurrence of `param` with the (decoded) `value`.
    pub(super) fn occurrence(&mut self, param: &Param, value: &str, out: &mut Violations) {
        let nth = self.count;
        self.count += 1;
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
                        for item in split_items(value, *d) {
                            each(item, out);
                        }
                    }
                }
            }
            Shape::Schema { layout, .. } => match layout {
                Some(Layout::Delimited(_)) if value.is_empty() => {}
                Some(Layout::Delimited(d)) => {
                    for item in split_items(value, *d) {
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
    pub(super) fn finish(self, param: &Param, out: &mut Violations) {
        if self.count == 0 {
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

/// The `minItems` / `maxItems` checks of an array parameter.
pub(super) fn finish_items(param: &Param, items: u64, out: &mut Violations) {
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

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::validator::compile::compiled_paths;

    /// The query parameter `q` with this schema (and `required`, `explode`).
    fn query_param(schema: Value, required: bool, explode: bool) -> Param {
        let mut compiled = compiled_paths(json!({ "/a": { "get": { "parameters": [
            { "name": "q", "in": "query", "required": required, "explode": explode, "schema": schema },
        ] } } }))
        .unwrap();
        compiled.operations.remove(0).query.remove(0)
    }

    /// Checks `values` as the occurrences of `param`; the violations.
    fn check(param: &Param, values: &[&str]) -> Vec<(String, String)> {
        let mut out = Violations::default();
        let mut occurrences = Occurrences::default();
        for value in values {
            occurrences.occurrence(param, value, &mut out);
        }
        occurrences.finish(param, &mut out);
        out.into_vec()
            .into_iter()
            .map(|v| (v.pointer, v.message))
            .collect()
    }

    fn one(pointer: &str, message: &str) -> Vec<(String, String)> {
        vec![(pointer.to_owned(), message.to_owned())]
    }

    #[test]
    fn a_scalar_occurs_once() {
        let param = query_param(json!({ "type": "integer" }), true, true);
        assert_eq!(check(&param, &["1"]), []);
        assert_eq!(
            check(&param, &[]),
            one("/query/q", "a required parameter is missing")
        );
        assert_eq!(
            check(&param, &["1", "2", "3"]),
            one("/query/q", "must not be repeated")
        );
        assert_eq!(
            check(&param, &["x"]),
            one("/query/q", r#""x" is not an integer"#)
        );
    }

    #[test]
    fn exploded_arrays_occur_once_per_item() {
        let schema = json!({ "type": "array", "items": { "type": "integer" }, "minItems": 2, "maxItems": 3 });
        let param = query_param(schema, false, true);
        assert_eq!(check(&param, &["1", "2"]), []);
        assert_eq!(check(&param, &[]), [], "absent and optional");
        assert_eq!(
            check(&param, &["1"]),
            one("/query/q", "has 1 items, fewer than 2")
        );
        assert_eq!(
            check(&param, &["1", "2", "3", "4"]),
            one("/query/q", "has 4 items, more than 3")
        );
        assert_eq!(
            check(&param, &["1", "x"]),
            one("/query/q/1", r#""x" is not an integer"#)
        );
    }

    #[test]
    fn delimited_arrays_split_one_occurrence() {
        let schema = json!({ "type": "array", "items": { "type": "integer" }, "uniqueItems": true, "maxItems": 2 });
        let param = query_param(schema, false, false);
        assert_eq!(check(&param, &["1,2"]), []);
        assert_eq!(
            check(&param, &["1,x"]),
            one("/query/q/1", r#""x" is not an integer"#)
        );
        assert_eq!(
            check(&param, &["3,3"]),
            one("/query/q", r#"has non-unique items ("3" repeats)"#)
        );
        assert_eq!(
            check(&param, &["1,2,4"]),
            one("/query/q", "has 3 items, more than 2")
        );
        assert_eq!(
            check(&param, &["1", "2"]),
            one("/query/q", "must not be repeated")
        );
    }

    #[test]
    fn rich_schemas_check_the_collected_value() {
        let param = query_param(
            json!({ "oneOf": [{ "type": "integer" }, { "type": "boolean" }] }),
            false,
            true,
        );
        assert_eq!(check(&param, &["7"]), []);
        assert_eq!(check(&param, &["true"]), []);
        let found = check(&param, &["x"]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "/query/q");
    }
}
