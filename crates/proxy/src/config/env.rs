//! `${VAR}`, `${VAR:default}` and `${VAR:?message}` filled from the
//! environment before the YAML is parsed, line by line so that line
//! numbers stay true. `$$` is a literal `$`. What the environment gave is
//! remembered, with the key it was written under, so that `/config` can
//! keep it out of sight (server/shown/redact.rs).

/// Why a substitution failed, at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A value that came from the environment (not a `${VAR:default}`'s
/// default, which is in the file), and the YAML key written before it on
/// its line, if any (`token` in `token: "${ADMIN_TOKEN}"`).
#[derive(Clone, PartialEq, Eq)]
pub struct FromEnv {
    pub key: Option<String>,
    pub value: String,
}

/// Never the value: a `Config` may be logged with `{:?}`.
impl std::fmt::Debug for FromEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromEnv")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Substitutes every reference in `text`, reading variables through
/// `lookup`; returns the text and the values the environment gave.
pub(crate) fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<(String, Vec<FromEnv>), EnvError> {
    let mut out = String::with_capacity(text.len());
    let mut seen = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        substitute_line(line, index + 1, &lookup, &mut out, &mut seen)?;
    }
    Ok((out, seen))
}

fn substitute_line(
    line: &str,
    number: usize,
    lookup: &impl Fn(&str) -> Option<String>,
    out: &mut String,
    seen: &mut Vec<FromEnv>,
) -> Result<(), EnvError> {
    let fail = |column: usize, message: String| EnvError {
        line: number,
        column,
        message,
    };
    let mut rest = line;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let column = line.len() - rest.len() + dollar + 1;
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let end = body
            .find('}')
            .ok_or_else(|| fail(column, "`${` without a closing `}`".into()))?;
        let reference = &body[..end];
        let (name, fallback) = match reference.find(':') {
            Some(colon) => (&reference[..colon], Some(&reference[colon + 1..])),
            None => (reference, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(fail(
                column,
                format!("invalid variable name in `${{{reference}}}`"),
            ));
        }
        let value = match (lookup(name), fallback) {
            (Some(value), _) => {
                seen.push(FromEnv {
                    key: key_before(&line[..column - 1]),
                    value: value.clone(),
                });
                value
            }
            (None, Some(message)) if message.starts_with('?') => {
                let message = message[1..].trim();
                let message = if message.is_empty() { "is required" } else { message };
                return Err(fail(column, format!("environment variable {name} is not set: {message}")));
            }
            (None, Some(default)) => default.to_string(),
            (None, None) => {
                return Err(fail(
                    column,
                    format!("environment variable {name} is not set (use `${{{name}:default}}` for a default)"),
                ))
            }
        };
        if value.contains('\n') {
            return Err(fail(
                column,
                format!("environment variable {name} contains a line break"),
            ));
        }
        out.push_str(&value);
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(())
}

/// The last `KEY:` (a colon followed by a space) in `prefix`,
/// without quotes: `address` in `- address: `, `rate` in
/// `{ key: client_ip, rate: "`; not `http` in `url: http://`.
fn key_before(prefix: &str) -> Option<String> {
    let bytes = prefix.as_bytes();
    let name_char = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    (0..bytes.len())
        .rev()
        .filter(|&i| bytes[i] == b':' && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace))
        .find_map(|i| {
            let before = prefix[..i].trim_end_matches(['"', '\'']);
            // By bytes: the last byte of a multi-byte character is not
            // a name's, and the name starts just after it (a char
            // boundary), where `p + 1` after `rfind` would cut the
            // character and panic.
            let start = before
                .bytes()
                .rposition(|b| !name_char(char::from(b)))
                .map_or(0, |p| p + 1);
            let name = &before[start..];
            (!name.is_empty()).then(|| name.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "PORT" => Some("8080".into()),
            "MULTI" => Some("a\nb".into()),
            _ => None,
        }
    }

    #[test]
    fn substitutes_values_defaults_and_escapes() {
        let text = "a: ${PORT}\nb: ${MISSING:9000}\nc: $${PORT} costs $5\nd: ${PORT:1}\n";
        let (out, seen) = substitute(text, env).unwrap();
        assert_eq!(out, "a: 8080\nb: 9000\nc: ${PORT} costs $5\nd: 8080\n");
        // Defaults are in the file; only what the environment gave is kept.
        let keys: Vec<_> = seen
            .iter()
            .map(|s| (s.key.as_deref(), s.value.as_str()))
            .collect();
        assert_eq!(keys, [(Some("a"), "8080"), (Some("d"), "8080")]);
        assert_eq!(substitute("e: ${MISSING:}", env).unwrap().0, "e: ");
    }

    #[test]
    fn remembers_the_key_each_value_was_written_under() {
        let key = |line: &str| {
            let (_, seen) = substitute(line, env).unwrap();
            seen.into_iter().next().and_then(|s| s.key)
        };
        assert_eq!(key("  - address: ${PORT}").as_deref(), Some("address"));
        assert_eq!(
            key("  address: 0.0.0.0:${PORT}").as_deref(),
            Some("address")
        );
        assert_eq!(key("url: http://h:${PORT}").as_deref(), Some("url"));
        assert_eq!(
            key("x: { key: ip, rate: \"${PORT}/s\" }").as_deref(),
            Some("rate")
        );
        assert_eq!(
            key("\"x-api-key\": \"${PORT}\"").as_deref(),
            Some("x-api-key")
        );
        assert_eq!(key("hosts: [\"${PORT}\"]").as_deref(), Some("hosts"));
        assert_eq!(key("  - ${PORT}"), None);
        assert!(!format!("{:?}", substitute("a: ${PORT}", env).unwrap().1).contains("8080"));
    }

    #[test]
    fn a_non_ascii_character_before_a_key_is_not_a_panic() {
        // Found by the `config` fuzz target: the key's start was taken
        // one byte after a multi-byte character, inside it.
        let key = |line: &str| {
            let (_, seen) = substitute(line, env).unwrap();
            seen.into_iter().next().and_then(|s| s.key)
        };
        assert_eq!(key("é: ${PORT}"), None);
        assert_eq!(key("{ \u{fffd}port: ${PORT} }").as_deref(), Some("port"));
        assert_eq!(key("clé-x: ${PORT}").as_deref(), Some("-x"));
    }

    #[test]
    fn errors_point_at_the_reference() {
        let err = substitute("x: 1\ny: ${NOPE}\n", env).unwrap_err();
        assert_eq!((err.line, err.column), (2, 4));
        assert!(err.message.contains("NOPE is not set"), "{}", err.message);
        let err = substitute("key: ${TOKEN:?set it to the issuer's token}", env).unwrap_err();
        assert!(
            err.message.ends_with("set it to the issuer's token"),
            "{}",
            err.message
        );
        assert!(substitute("k: ${OPEN", env)
            .unwrap_err()
            .message
            .contains("closing"));
        assert!(substitute("k: ${BAD-NAME}", env)
            .unwrap_err()
            .message
            .contains("invalid variable"));
        assert!(substitute("k: ${MULTI}", env)
            .unwrap_err()
            .message
            .contains("line break"));
    }
}
