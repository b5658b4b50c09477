//! The primitive JSON types a parameter's value may have, and reading a
//! textual value as one of them.

use serde_json::Value;

/// A set of primitive JSON types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    pub(super) const BOOLEAN: Types = Types(1);
    pub(super) const INTEGER: Types = Types(2);
    pub(super) const NUMBER: Types = Types(4);
    pub(super) const STRING: Types = Types(8);
    pub(super) const ANY: Types = Types(15);
    pub(super) const NONE: Types = Types(0);

    pub(super) fn has(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    pub(super) fn describe(self) -> &'static str {
        match self.0 {
            1 => "a boolean",
            2 => "an integer",
            4 | 6 => "a number",
            8 => "a string",
            _ => "a value of the declared types",
        }
    }
}

impl std::ops::BitOr for Types {
    type Output = Types;
    fn bitor(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }
}

pub(super) fn types_of(name: &str) -> Types {
    match name {
        "integer" => Types::INTEGER,
        "number" => Types::NUMBER | Types::INTEGER,
        "string" => Types::STRING,
        "boolean" => Types::BOOLEAN,
        _ => Types::NONE,
    }
}

/// `-?[0-9]+`
pub(super) fn is_integer(value: &str) -> bool {
    let digits = value.strip_prefix('-').unwrap_or(value).as_bytes();
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// JSON number syntax (leading zeros allowed).
pub(super) fn is_number(value: &str) -> bool {
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

/// Coerces one textual value to JSON for a [`Shape::Schema`] check.
pub(super) fn coerce(value: &str, types: Types) -> Value {
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
    fn values_are_coerced_to_the_first_type_they_fit() {
        let numbers = Types::INTEGER | Types::NUMBER;
        assert_eq!(coerce("42", Types::INTEGER), Value::from(42));
        assert_eq!(coerce("42", Types::STRING), Value::from("42"));
        assert_eq!(coerce("1.5", numbers), Value::from(1.5));
        assert_eq!(coerce("1.5", Types::INTEGER), Value::from(1.5));
        // Past i64 an integer is still a number.
        assert_eq!(
            coerce("99999999999999999999", Types::INTEGER),
            Value::from(1e20)
        );
        assert_eq!(coerce("true", Types::BOOLEAN), Value::Bool(true));
        assert_eq!(coerce("false", Types::ANY), Value::Bool(false));
        assert_eq!(coerce("true", Types::STRING), Value::from("true"));
        assert_eq!(coerce("x1", Types::ANY), Value::from("x1"));
    }

    #[test]
    fn type_names_and_descriptions() {
        assert_eq!(types_of("integer"), Types::INTEGER);
        assert_eq!(types_of("number"), Types::NUMBER | Types::INTEGER);
        assert_eq!(types_of("string"), Types::STRING);
        assert_eq!(types_of("boolean"), Types::BOOLEAN);
        assert_eq!(types_of("object"), Types::NONE);
        assert_eq!(types_of("number").describe(), "a number");
        assert_eq!(Types::INTEGER.describe(), "an integer");
        assert_eq!(Types::BOOLEAN.describe(), "a boolean");
        assert_eq!(Types::STRING.describe(), "a string");
        assert_eq!(
            (Types::STRING | Types::BOOLEAN).describe(),
            "a value of the declared types"
        );
        assert!(Types::ANY.has(Types::STRING) && !Types::NUMBER.has(Types::INTEGER));
    }
}
