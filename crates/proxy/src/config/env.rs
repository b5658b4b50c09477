//! `${VAR}`, `${VAR:default}` and `${VAR:?message}` filled from the
//! environment before the YAML is parsed, line by line so that line
//! numbers stay true. `$$` is a literal `$`.

/// Why a substitution failed, at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Substitutes every reference in `text`, reading variables through `lookup`.
pub(crate) fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, EnvError> {
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split_inclusive('\n').enumerate() {
        substitute_line(line, index + 1, &lookup, &mut out)?;
    }
    Ok(out)
}

fn substitute_line(
    line: &str,
    number: usize,
    lookup: &impl Fn(&str) -> Option<String>,
    out: &mut String,
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
            (Some(value), _) => value,
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
        assert_eq!(
            substitute(text, env).unwrap(),
            "a: 8080\nb: 9000\nc: ${PORT} costs $5\nd: 8080\n"
        );
        assert_eq!(substitute("e: ${MISSING:}", env).unwrap(), "e: ");
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
