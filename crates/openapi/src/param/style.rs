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
