//! Configuration errors: always the file, the line and column, and the key.

use std::{fmt, path::PathBuf};

use serde_saphyr::Location;

/// What a check finds wrong: where, which key, and what is wrong; made a
/// [`ConfigError`] with the file's name. Here, below every file's checks,
/// so that a settings file's own checks need nothing above it.
pub(crate) type Problem = (Location, String, String);

/// A mistake in a configuration file. Displayed as
/// `FILE:LINE:COLUMN: KEY: MESSAGE`; the process exits non-zero on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when the whole file is at fault (it cannot be read).
    pub line: usize,
    pub column: usize,
    /// Dotted path of the offending key, e.g. `upstreams.petstore.balance`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Adds "did you mean `x`?" to serde's "unknown field `y`, expected one of
/// a, b" and "unknown variant" messages when a candidate is close.
pub(crate) fn with_suggestion(message: &str) -> String {
    let Some((unknown, expected)) = unknown_and_expected(message) else {
        return message.to_string();
    };
    let best = expected
        .split(',')
        .map(|candidate| candidate.trim().trim_matches('`'))
        .filter(|candidate| !candidate.is_empty())
        .map(|candidate| (strsim::damerau_levenshtein(unknown, candidate), candidate))
        .min();
    match best {
        Some((distance, candidate)) if distance <= 2 || candidate.starts_with(unknown) => {
            format!("{message}; did you mean `{candidate}`?")
        }
        _ => message.to_string(),
    }
}

fn unknown_and_expected(message: &str) -> Option<(&str, &str)> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (unknown, rest) = rest.split_once('`')?;
    let (_, expected) = rest.split_once("expected one of ")?;
    Some((unknown, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            with_suggestion("unknown field `retires`, expected one of hosts, retries"),
            "unknown field `retires`, expected one of hosts, retries; did you mean `retries`?"
        );
        assert_eq!(
            with_suggestion("unknown variant `round-robin`, expected one of `round_robin`, `random`"),
            "unknown variant `round-robin`, expected one of `round_robin`, `random`; did you mean `round_robin`?"
        );
        let far = "unknown field `zzz`, expected one of hosts, retries";
        assert_eq!(with_suggestion(far), far);
        assert_eq!(with_suggestion("invalid type"), "invalid type");
    }

    #[test]
    fn display_names_file_line_and_key() {
        let err = ConfigError {
            file: "sluice.yaml".into(),
            line: 4,
            column: 5,
            key: "upstreams.a.retries".into(),
            message: "invalid u32".into(),
        };
        assert_eq!(
            err.to_string(),
            "sluice.yaml:4:5: upstreams.a.retries: invalid u32"
        );
    }
}
