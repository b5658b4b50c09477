//! The hand-written checks of one primitive value (integer, number,
//! string, boolean): bounds, `multipleOf`, lengths, `pattern`, `enum`.

use std::cmp::Ordering;

use regex::Regex;
use serde_json::Value;

use super::types::{is_integer, is_number, Types};
use crate::text::{show, truncate_chars, ECHO_CHARS};
use crate::Violations;

/// A lower or upper bound.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bound {
    pub(super) limit: f64,
    pub(super) exclusive: bool,
}

/// The hand-checked rules for one primitive value.
#[derive(Debug)]
pub(crate) struct Scalar {
    pub(super) types: Types,
    /// `format: int32` (32) or `int64` (64).
    pub(super) int_bits: u8,
    pub(super) lower: Option<Bound>,
    pub(super) upper: Option<Bound>,
    pub(super) multiple_of: Option<f64>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) pattern: Option<Regex>,
    pub(super) options: Option<Box<[Value]>>,
}

impl Scalar {
    pub(super) fn any() -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages `scalar` gives `value`, as item 2 of `/query/q`.
    fn messages(scalar: &Scalar, value: &str) -> Vec<String> {
        let mut out = Violations::default();
        scalar.check(value, "/query/q", Some(2), &mut out);
        out.into_vec()
            .into_iter()
            .map(|v| {
                assert_eq!(v.pointer, "/query/q/2");
                v.message
            })
            .collect()
    }

    fn typed(types: Types) -> Scalar {
        Scalar {
            types,
            ..Scalar::any()
        }
    }

    #[test]
    fn integer_bounds_compare_exactly() {
        assert_eq!(cmp_int(i64::MAX, 9.2e18), Ordering::Greater);
        assert_eq!(cmp_int(5, 5.0), Ordering::Equal);
        assert_eq!(cmp_int(5, 5.5), Ordering::Less);
        assert_eq!(cmp_int(-3, -3.5), Ordering::Greater);
        assert!(is_multiple(0.3, 0.1) && !is_multiple(0.35, 0.1));
        assert!(is_multiple(7.0, 0.0));
    }

    #[test]
    fn types_decide_what_a_value_may_be() {
        let integer = typed(Types::INTEGER);
        assert_eq!(messages(&integer, "12"), Vec::<String>::new());
        assert_eq!(messages(&integer, "1.5"), [r#""1.5" is not an integer"#]);
        assert_eq!(
            messages(&typed(Types::BOOLEAN), "yes"),
            [r#""yes" is not a boolean"#]
        );
        assert_eq!(
            messages(&typed(Types::BOOLEAN), "false"),
            Vec::<String>::new()
        );
        assert_eq!(messages(&Scalar::any(), "anything"), Vec::<String>::new());
    }

    #[test]
    fn bounds_inclusive_and_exclusive() {
        let scalar = Scalar {
            lower: Some(Bound {
                limit: 1.0,
                exclusive: false,
            }),
            upper: Some(Bound {
                limit: 10.0,
                exclusive: true,
            }),
            ..typed(Types::INTEGER | Types::NUMBER)
        };
        assert_eq!(messages(&scalar, "1"), Vec::<String>::new());
        assert_eq!(messages(&scalar, "9.5"), Vec::<String>::new());
        assert_eq!(
            messages(&scalar, "0"),
            [r#""0" is less than the minimum of 1"#]
        );
        assert_eq!(
            messages(&scalar, "10"),
            [r#""10" is greater than or equal to the exclusive maximum of 10"#]
        );
        assert_eq!(messages(&scalar, "1e400"), [r#""1e400" is out of range"#]);
    }

    #[test]
    fn integer_formats_and_multiples() {
        let int32 = Scalar {
            int_bits: 32,
            multiple_of: Some(5.0),
            ..typed(Types::INTEGER)
        };
        assert_eq!(messages(&int32, "2147483645"), Vec::<String>::new());
        assert_eq!(
            messages(&int32, "2147483650"),
            [r#""2147483650" is out of range for int32"#]
        );
        assert_eq!(messages(&int32, "7"), [r#""7" is not a multiple of 5"#]);
        let int64 = Scalar {
            int_bits: 64,
            ..typed(Types::INTEGER)
        };
        assert_eq!(
            messages(&int64, "9223372036854775808"),
            [r#""9223372036854775808" is out of range for int64"#]
        );
    }

    #[test]
    fn string_lengths_patterns_and_options() {
        let scalar = Scalar {
            min_length: Some(1),
            max_length: Some(3),
            pattern: Some(Regex::new("^[a-z]+$").unwrap()),
            options: Some(vec![Value::from("ab"), Value::from("abcd")].into_boxed_slice()),
            ..typed(Types::STRING)
        };
        assert_eq!(messages(&scalar, "ab"), Vec::<String>::new());
        assert_eq!(
            messages(&scalar, ""),
            [
                r#""" is shorter than 1 character"#,
                r#""" does not match "^[a-z]+$""#
            ]
        );
        // Characters, not bytes: "äöü" is three long.
        assert_eq!(
            messages(&scalar, "äöü"),
            [r#""äöü" does not match "^[a-z]+$""#]
        );
        // Options are checked only once everything else passes.
        assert_eq!(
            messages(&scalar, "abc"),
            [r#""abc" is not one of ["ab", "abcd"]"#]
        );
        assert_eq!(
            messages(&scalar, "abcd"),
            [r#""abcd" is longer than 3 characters"#]
        );
    }

    #[test]
    fn options_match_by_type_and_are_listed_briefly() {
        assert!(enum_matches(&Value::from(2), "2.0"));
        assert!(!enum_matches(&Value::from(2), "two"));
        assert!(enum_matches(&Value::Bool(true), "true"));
        assert!(!enum_matches(&Value::Null, "null"));
        let options: Vec<Value> = (1..=6).map(Value::from).chain([Value::Null]).collect();
        assert_eq!(list_options(&options), "[1, 2, 3, 4, … (7 in all)]");
        assert_eq!(list_options(&[Value::from("a\"b")]), r#"["a\"b"]"#);
    }
}
