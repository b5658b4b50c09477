//! Reading a Gateway API source: files, or directories of `.yaml` and
//! `.yml` files (in name order, not below), each a stream of YAML
//! documents; every document's kind and name, and its typed parts when
//! it is a kind the proxy reads. A document that is not YAML fails the
//! load (file, line, key); one whose `spec` has a field the proxy does
//! not support is kept, with the field named, for its status.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::objects::Head;
use crate::config::ConfigError;

/// One YAML document of a file.
#[derive(Debug, Clone)]
pub(super) struct Doc {
    pub file: PathBuf,
    /// The line its text starts on (1-based).
    pub line: usize,
    pub text: String,
    pub head: Head,
    /// Its place among every document read (the order of the files).
    pub order: usize,
}

/// Where something is: `FILE:LINE`.
pub(super) fn at(file: &Path, line: usize) -> String {
    format!("{}:{line}", file.display())
}

impl Doc {
    /// `NAMESPACE/NAME` (`default` when it has none).
    pub(super) fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.head.metadata.name)
    }

    pub(super) fn namespace(&self) -> &str {
        self.head.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// Where a line of its text is in its file.
    pub(super) fn at_line(&self, line: u64) -> String {
        let line = usize::try_from(line).unwrap_or(1).max(1);
        at(&self.file, self.line + line - 1)
    }

    /// Its typed form; the error names the file, line and key.
    pub(super) fn typed<T: DeserializeOwned>(&self) -> Result<T, String> {
        let mut key = String::new();
        serde_saphyr::with_deserializer_from_str(&self.text, |de| {
            serde_path_to_error::deserialize(de).map_err(|err| {
                key = err.path().to_string();
                err.into_inner()
            })
        })
        .map_err(|err| {
            let line = err.location().map_or(0, |l| l.line());
            let text = serde_saphyr::MessageFormatter::format_message(
                &serde_saphyr::DefaultMessageFormatter,
                &err,
            );
            let message = text.lines().next().unwrap_or_default().to_string();
            let message = crate::config::error::with_suggestion(&message);
            format!("{}: {key}: {message}", self.at_line(line))
        })
    }
}

/// Every document of `paths` (relative to `base`, the configuration's
/// directory), in order.
pub(super) fn read(paths: &[String], base: &Path) -> Result<Vec<Doc>, ConfigError> {
    let mut files = Vec::new();
    for path in paths {
        let path = base.join(path);
        let error = |message: String| ConfigError {
            file: path.clone(),
            line: 0,
            column: 0,
            key: "gateway_api.files".into(),
            message,
        };
        if path.is_dir() {
            let entries = std::fs::read_dir(&path)
                .map_err(|err| error(format!("cannot read the directory: {err}")))?;
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path);
        } else {
            return Err(error("no such file or directory".into()));
        }
    }
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|err| ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            key: String::new(),
            message: format!("cannot read the file: {err}"),
        })?;
        parse_into(&text, &file, &mut docs)?;
    }
    Ok(docs)
}

/// The documents of `text` (read from `file`), after `docs`.
pub(super) fn parse_into(text: &str, file: &Path, docs: &mut Vec<Doc>) -> Result<(), ConfigError> {
    for (line, text) in split(text) {
        if text.trim().is_empty() || text.lines().all(|l| l.trim_start().starts_with('#')) {
            continue;
        }
        let head: Head = serde_saphyr::from_str(&text).map_err(|err| {
            let (l, column) = err
                .location()
                .map_or((1, 0), |l| (l.line() as usize, l.column() as usize));
            ConfigError {
                file: file.to_path_buf(),
                line: line + l.max(1) - 1,
                column,
                key: String::new(),
                message: format!("not a Kubernetes object: {}", first_line(&err.to_string())),
            }
        })?;
        let order = docs.len();
        docs.push(Doc {
            file: file.to_path_buf(),
            line,
            text,
            head,
            order,
        });
    }
    Ok(())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The documents of a YAML stream with the line each starts on: split at
/// `---` lines (a `...` line ends one).
pub(super) fn split(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if marker || line == "..." {
            docs.push((start, std::mem::take(&mut current)));
            start = i + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    docs.push((start, current));
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_keep_their_lines() {
        let docs = split("a: 1\n---\nb: 2\nc: 3\n--- # next\n\n...\nd: 4\n");
        let starts: Vec<usize> = docs.iter().map(|(l, _)| *l).collect();
        assert_eq!(starts, [1, 3, 6, 8]);
        assert_eq!(docs[1].1, "b: 2\nc: 3\n");
        assert_eq!(docs[3].1, "d: 4\n");
    }
}
