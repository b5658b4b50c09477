//! The YAML configuration loader (crates/proxy/src/config): any bytes as
//! a configuration file give a configuration or an error, never a panic.
//! An error names the file, lies within it (its line is at most one past
//! the last), says what is wrong on one line, and never shows a value the
//! environment gave (`${SECRET}`) unless the file itself holds that text.
//! Loading is deterministic: the same text gives the same answer.

use std::path::Path;

use proxy::config::parse;

const FILE: &str = "fuzz.yaml";
const SECRET: &str = "s3cr3t-fuzz-value";

fn lookup(name: &str) -> Option<String> {
    match name {
        "SECRET" => Some(SECRET.into()),
        "PORT" => Some("8080".into()),
        "UPSTREAM" => Some("http://127.0.0.1:9000".into()),
        _ => None,
    }
}

pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let first = parse(&text, Path::new(FILE), lookup);
    let second = parse(&text, Path::new(FILE), lookup);
    match (first, second) {
        (Ok(_), Ok(_)) => {}
        (Err(error), Err(again)) => {
            assert_eq!(error, again);
            assert_eq!(error.file, Path::new(FILE));
            let shown = error.to_string();
            crate::assert_located(&shown, FILE, &error.message, error.line, &text);
            if !text.contains(SECRET) {
                assert!(!shown.contains(SECRET), "{shown}");
            }
        }
        (first, second) => panic!("two loads disagree: {first:?} / {second:?}"),
    }
}
