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
