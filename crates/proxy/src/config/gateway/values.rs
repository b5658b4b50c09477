//! The values of Gateway API objects the proxy checks before it uses
//! them: durations, host names, paths (in the normal form routes are
//! matched in), header and query matches, header modifiers and path
//! modifiers. Each error says what is wrong; the caller names the key.

use http::{HeaderName, HeaderValue};
use serde_saphyr::Spanned;

use super::objects::{HeaderModifier, PathModifier};
use super::rules::spanned;
use crate::config::{
    managed_header, FieldMatchSettings, HeaderFields, HeaderRuleSettings, Parsed,
    PathRewriteSettings, Pattern, Setting,
};

pub(super) fn header_rules(modifier: &HeaderModifier) -> Result<HeaderRuleSettings, String> {
    let name = |text: &str| -> Result<HeaderName, String> {
        let name = HeaderName::from_bytes(text.to_ascii_lowercase().as_bytes())
            .map_err(|_| format!("`{text}` is not a header name"))?;
        match managed_header(name.as_str()) {
            true => Err(format!(
                "`{text}` is written by the proxy; it cannot be changed"
            )),
            false => Ok(name),
        }
    };
    let pairs = |list: &[super::objects::NameValue]| -> Result<HeaderFields, String> {
        let mut fields = Vec::new();
        for pair in list {
            let value = HeaderValue::from_str(&pair.value)
                .map_err(|_| format!("the value of `{}` is not a header value", pair.name))?;
            fields.push((name(&pair.name)?, value));
        }
        Ok(HeaderFields(fields))
    };
    Ok(HeaderRuleSettings {
        set: pairs(&modifier.set)?,
        add: pairs(&modifier.add)?,
        remove: modifier
            .remove
            .iter()
            .map(|n| name(n).map(Parsed))
            .collect::<Result<_, _>>()?,
    })
}

pub(super) fn path_modifier(
    modifier: Option<&PathModifier>,
) -> Result<Option<PathRewriteSettings>, String> {
    let Some(modifier) = modifier else {
        return Ok(None);
    };
    let rule = match (
        modifier.kind.as_str(),
        &modifier.replace_full_path,
        &modifier.replace_prefix_match,
    ) {
        ("ReplaceFullPath", Some(full), _) => {
            path_value(full)?;
            PathRewriteSettings::Full(full.clone())
        }
        ("ReplacePrefixMatch", _, Some(prefix)) => {
            if !prefix.is_empty() {
                path_value(prefix)?;
            }
            PathRewriteSettings::Prefix(prefix.clone())
        }
        (kind, _, _) => {
            return Err(format!(
                "path type `{kind}` without its value is not supported"
            ))
        }
    };
    Ok(Some(rule))
}

/// Header or query parameter matches; only the first of a name counts.
pub(super) fn conditions(
    list: &[super::objects::ValueMatch],
    headers: bool,
) -> Result<Vec<Spanned<FieldMatchSettings>>, String> {
    let mut out: Vec<Spanned<FieldMatchSettings>> = Vec::new();
    for item in list {
        let same = |o: &Spanned<FieldMatchSettings>| match headers {
            true => o.value.name.eq_ignore_ascii_case(&item.name),
            false => o.value.name == item.name,
        };
        if out.iter().any(same) {
            continue;
        }
        if headers && HeaderName::from_bytes(item.name.as_bytes()).is_err() {
            return Err(format!("`{}` is not a header name", item.name));
        }
        let (value, regex) = match item.kind.as_deref().unwrap_or("Exact") {
            "Exact" => (Some(item.value.clone()), None),
            "RegularExpression" => {
                let pattern = Pattern::parse(&item.value).map_err(|e| format!("{e:#}"))?;
                (None, Some(Parsed(pattern)))
            }
            other => return Err(format!("type `{other}` is not supported")),
        };
        out.push(spanned(FieldMatchSettings {
            name: item.name.clone(),
            value,
            regex,
            present: None,
        }));
    }
    Ok(out)
}

/// A Gateway API duration (GEP-2257: `1h`, `500ms`, `1m30s`, `0s`).
pub(super) fn duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("`{text}` is not a duration like 10s or 500ms");
    let mut total = std::time::Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let (unit, len) = match rest {
            _ if rest.starts_with("ms") => (std::time::Duration::from_millis(number), 2),
            _ if rest.starts_with('h') => (std::time::Duration::from_secs(number * 3600), 1),
            _ if rest.starts_with('m') => (std::time::Duration::from_secs(number * 60), 1),
            _ if rest.starts_with('s') => (std::time::Duration::from_secs(number), 1),
            _ => return Err(bad()),
        };
        total += unit;
        rest = &rest[len..];
    }
    Ok(total)
}

/// A host name as the Gateway API writes one (RFC 1123, lower case; a
/// route's may start with `*.`).
pub(super) fn hostname(name: &str, wildcard: bool) -> Result<(), String> {
    let bare = match name.strip_prefix("*.") {
        Some(rest) if wildcard => rest,
        _ => name,
    };
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    match !bare.is_empty() && bare.len() <= 253 && bare.split('.').all(label) {
        true => Ok(()),
        false => Err(format!("`{name}` is not a host name")),
    }
}

/// A path the Gateway API accepts and the proxy's routes are written in
/// (normal form): no `//`, no dot segments, only unreserved characters,
/// sub-delimiters, `:` and `@`, and escapes of other bytes.
pub(super) fn path_value(path: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{path}`: {why}"));
    if !path.starts_with('/') {
        return bad("a path starts with `/`");
    }
    if path.contains("//") || path.split('/').any(|s| s == "." || s == "..") {
        return bad("no `//` or dot segments");
    }
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |b: u8| b.is_ascii_digit() || (b'A'..=b'F').contains(&b);
            let (h, l) = (bytes.get(i + 1).copied(), bytes.get(i + 2).copied());
            let (Some(h), Some(l)) = (h, l) else {
                return bad("a `%` needs two hex digits");
            };
            if !hex(h) || !hex(l) {
                return bad("escapes are upper-case hex");
            }
            let decoded = u8::from_str_radix(&path[i + 1..i + 3], 16).unwrap_or(b'/');
            if decoded.is_ascii_alphanumeric() || b"-._~/\\".contains(&decoded) {
                return bad("an escape of an unreserved character or a slash");
            }
            i += 3;
            continue;
        }
        if !(b.is_ascii_alphanumeric() || b"-._~!$&'()*+,=:@/".contains(&b)) {
            return bad("a character that must be escaped (or `;`)");
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_durations_and_paths_and_hosts() {
        assert_eq!(duration("500ms").unwrap().as_millis(), 500);
        assert_eq!(duration("1m30s").unwrap().as_secs(), 90);
        assert_eq!(duration("0s").unwrap(), std::time::Duration::ZERO);
        for bad in ["", "10", "1x", "s"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        for good in ["/", "/v1/pets", "/a:b@c", "/%20x"] {
            assert!(path_value(good).is_ok(), "{good}");
        }
        for bad in [
            "v1", "/a//b", "/a/../b", "/a/.", "/%2F", "/%7e", "/%41", "/a b", "/a;b", "/a\r\n",
        ] {
            assert!(path_value(bad).is_err(), "{bad}");
        }
        assert!(
            hostname("*.example.com", true).is_ok() && hostname("*.example.com", false).is_err()
        );
        for bad in ["Example.com", "a..b", "-a.com", "a.com\r\nx: y", ""] {
            assert!(hostname(bad, true).is_err(), "{bad:?}");
        }
    }
}
