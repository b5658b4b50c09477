//! A parameter's `style` and `explode`: how the items of an array value
//! are laid out on the wire, and splitting them apart.

use super::model::{In, Layout};

/// The array layout for a style; `Err` names what is not supported.
pub(super) fn layout(
    location: In,
    style: Option<&str>,
    explode: Option<bool>,
) -> Result<Layout, String> {
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

/// Splits a delimited value; items are trimmed of spaces for header values.
pub(crate) fn split_items(value: &str, delimiter: u8) -> impl Iterator<Item = &str> {
    value.split(char::from(delimiter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_style_and_explode_gives_its_layout() {
        let cases: &[(In, Option<&str>, Option<bool>, Layout)] = &[
            (In::Query, None, None, Layout::Exploded),
            (In::Query, Some("form"), Some(true), Layout::Exploded),
            (
                In::Query,
                Some("form"),
                Some(false),
                Layout::Delimited(b','),
            ),
            (
                In::Query,
                Some("spaceDelimited"),
                None,
                Layout::Delimited(b' '),
            ),
            (
                In::Query,
                Some("pipeDelimited"),
                Some(false),
                Layout::Delimited(b'|'),
            ),
            // A cookie holds one value: form arrays are comma lists, exploded or not.
            (In::Cookie, None, None, Layout::Delimited(b',')),
            (
                In::Cookie,
                Some("form"),
                Some(true),
                Layout::Delimited(b','),
            ),
            (In::Path, None, None, Layout::Delimited(b',')),
            (
                In::Path,
                Some("simple"),
                Some(true),
                Layout::Delimited(b','),
            ),
            (In::Header, None, Some(false), Layout::Delimited(b',')),
        ];
        for &(location, style, explode, want) in cases {
            assert_eq!(
                layout(location, style, explode),
                Ok(want),
                "{location:?} {style:?} {explode:?}"
            );
        }
    }

    #[test]
    fn unsupported_styles_are_named() {
        assert_eq!(
            layout(In::Path, Some("matrix"), None),
            Err("`style: matrix` is not supported for path parameters".to_owned())
        );
        assert_eq!(
            layout(In::Query, Some("deepObject"), Some(true)),
            Err("`style: deepObject` is not supported for query parameters".to_owned())
        );
        assert_eq!(
            layout(In::Header, Some("form"), None),
            Err("`style: form` is not supported for header parameters".to_owned())
        );
        assert_eq!(
            layout(In::Cookie, Some("spaceDelimited"), None),
            Err("`style: spaceDelimited` is not supported for cookie parameters".to_owned())
        );
    }

    #[test]
    fn delimited_values_split_into_items() {
        let items: Vec<&str> = split_items("1,2,,3", b',').collect();
        assert_eq!(items, ["1", "2", "", "3"]);
        let items: Vec<&str> = split_items("a b|c", b' ').collect();
        assert_eq!(items, ["a", "b|c"]);
        let items: Vec<&str> = split_items("a b|c", b'|').collect();
        assert_eq!(items, ["a b", "c"]);
        let items: Vec<&str> = split_items("", b',').collect();
        assert_eq!(items, [""]);
    }
}
