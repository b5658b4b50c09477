//! The phases of `crates/proxy/src/session` (docs/ARCHITECTURE.md, "The
//! path of one request"): a request goes through the files of a phase,
//! then those of later phases, and never calls back into a file it left.
//! Each file has a phase, or is shared (the vocabulary and the services
//! every phase uses: types, waits, host choice, the answer's bookkeeping).
//! This reads every path into another session file (`super::x`,
//! `crate::session::x`) and every call of a method of the request's state
//! (`Session<S>` for HTTP/1.1 clients, `Stream` for HTTP/2 ones, whose
//! methods are spread over the files of their phases), and fails on one
//! that goes back to an earlier phase, or from a shared file into a phase.

use crate::support;

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Files of `session/` and their phases, in the order a request goes.
const PHASES: &[(&str, u8)] = &[
    // The client connection: between requests, a request read, its end.
    ("h1/idle.rs", 0),
    ("h1/park.rs", 0),
    ("h1/mod.rs", 0),
    ("h2/mod.rs", 0),
    // Normalisation, routing, the chain's request phase.
    ("admit.rs", 1),
    // The upstream phase of each client: the request head for the
    // upstream, the host, the exchange, the answer handed on.
    ("h1/forward.rs", 2),
    ("h2/to_h1.rs", 2),
    ("h2/to_h2.rs", 2),
    // Copies for a route's mirrors, started beside the forwarding.
    ("mirror.rs", 2),
    // The one loop of every pair.
    ("attempts/mod.rs", 3),
    // The protocol pair's part of an attempt (`ToUpstream`).
    ("h1/to_h1.rs", 4),
    ("h1/pump_h1.rs", 4),
    ("h1/to_h2.rs", 4),
    ("h2/pump_h1.rs", 4),
    ("h2/pump_h2.rs", 4),
    // The response to an HTTP/1.1 client.
    ("h1/relay_h1.rs", 5),
    ("h1/relay_h2.rs", 5),
    // Answers of the proxy's own.
    ("h1/local.rs", 6),
];

/// Files any phase may use; they use no phase.
const SHARED: &[&str] = &[
    "mod.rs",
    "worker.rs",
    "h1/waits.rs",
    "h1/response.rs",
    "attempts/decide.rs",
    "attempts/hosts.rs",
    "attempts/policy.rs",
    "attempts/proxied.rs",
    "attempts/to_upstream.rs",
    "attempts/traced.rs",
    "traced.rs",
    "h2/client_side.rs",
    "h2/request_body.rs",
];

/// Whether `line` opens an `impl` of a request's state (`Session<S>`,
/// `Stream`), whose methods make a request's phases.
fn opens_state(line: &str) -> bool {
    line.starts_with("impl") && (line.ends_with("> Session<S> {") || line == "impl Stream {")
}

/// Receivers through which a file calls a method of a request's state
/// (`self.` only in a file with methods of its own on one).
const RECEIVERS: &[&str] = &["self.session.", "self.stream.", "stream.", "session."];

fn session_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session")
}

/// `Some(Some(phase))`, `Some(None)` for a shared file, `None` for a file
/// with neither (tests are left out).
fn phase(file: &str) -> Option<Option<u8>> {
    if let Some((_, phase)) = PHASES.iter().find(|(f, _)| *f == file) {
        return Some(Some(*phase));
    }
    SHARED.contains(&file).then_some(None)
}

/// A file's code: comments dropped, and its tests (`#[cfg(test)]` on).
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("read a source");
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The directory `super::` names from `file` (relative to session/).
fn super_dir(file: &str) -> String {
    let parent = Path::new(file).parent().map(Path::to_path_buf);
    let parent = parent.unwrap_or_default();
    let dir = if file.ends_with("mod.rs") {
        parent.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        parent
    };
    dir.to_string_lossy().to_string()
}

/// The session file a path `names` (from `dir`) goes into, as deep as
/// its names are modules: `exchange::hosts::Sender` is exchange/hosts.rs.
fn resolve(dir: &str, names: &[String], files: &BTreeSet<String>) -> Option<String> {
    let join = |dir: &str, tail: &str| match dir {
        "" => tail.to_string(),
        dir => format!("{dir}/{tail}"),
    };
    let mut found = None;
    let mut dir = dir.to_string();
    for name in names {
        let file = join(&dir, &format!("{name}.rs"));
        let module = join(&dir, &format!("{name}/mod.rs"));
        if files.contains(&file) {
            found = Some(file);
        } else if files.contains(&module) {
            found = Some(module);
        } else {
            break;
        }
        dir = join(&dir, name);
    }
    found
}

/// The paths after each `prefix` in `text`, as their leading names.
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        found.extend(use_tree(after, &mut 0));
        rest = after;
    }
    found.retain(|p| !p.is_empty());
    found
}

/// The paths of the use tree at `text[*at..]`, each as its leading names
/// (`a::{b::C, d::{self, E}}` gives a b C, a d self, a d E).
fn use_tree(text: &str, at: &mut usize) -> Vec<Vec<String>> {
    let skip_space = |at: &mut usize| {
        let rest = &text[*at..];
        *at += rest.len() - rest.trim_start().len();
    };
    skip_space(at);
    let rest = &text[*at..];
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    let names: Vec<String> = rest[..end]
        .split("::")
        .filter(|name| !name.is_empty())
        .map(String::from)
        .collect();
    *at += end;
    if !text[*at..].starts_with('{') {
        return vec![names];
    }
    *at += 1;
    let mut leaves = Vec::new();
    loop {
        for leaf in use_tree(text, at) {
            if !leaf.is_empty() {
                leaves.push(names.iter().cloned().chain(leaf).collect());
            }
        }
        skip_space(at);
        match text[*at..].chars().next() {
            Some(',') => *at += 1,
            Some('}') => {
                *at += 1;
                return leaves;
            }
            _ => return leaves,
        }
    }
}

/// The session files `file` names in paths.
fn uses(file: &str, text: &str, files: &BTreeSet<String>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let own_dir = Path::new(file)
        .parent()
        .map(|p| p.to_string_lossy().to_string())
        .unwrap_or_default();
    for (prefix, dir) in [
        ("super::", super_dir(file)),
        ("crate::session::", String::new()),
    ] {
        for names in paths_after(text, prefix) {
            if let Some(target) = resolve(&dir, &names, files) {
                used.insert(target);
            }
        }
    }
    // A mod.rs uses its children by their names (`use child::x`).
    if file.ends_with("mod.rs") {
        for names in paths_after(text, "use ") {
            if let Some(target) = resolve(&own_dir, &names, files) {
                used.insert(target);
            }
        }
    }
    used.remove(file);
    used
}

/// Methods of the request's states, by name: the files defining one so
/// named (`Session<S>` and `Stream` may both have it).
fn methods(texts: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in texts {
        let mut inside = false;
        for line in text.lines() {
            if opens_state(line) {
                inside = true;
            } else if line.starts_with('}') {
                inside = false;
            } else if inside {
                let trimmed = line.trim_start();
                let indent = line.len() - trimmed.len();
                let name = trimmed
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub(in crate::session) ")
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("async ")
                    .strip_prefix("fn ")
                    .map(|rest| rest.split(['(', '<']).next().unwrap_or_default());
                if let (4, Some(name)) = (indent, name) {
                    defined
                        .entry(name.to_string())
                        .or_default()
                        .insert(file.clone());
                }
            }
        }
    }
    defined
}

/// What is wrong with `caller` using `target`, if anything.
fn backward(caller: &str, target: &str) -> Option<String> {
    let (Some(from), Some(to)) = (phase(caller), phase(target)) else {
        return None;
    };
    match (from, to) {
        (_, None) => None,
        (None, Some(to)) => Some(format!("a shared file uses {target} (phase {to})")),
        (Some(from), Some(to)) if to < from => Some(format!(
            "phase {from} calls back into {target} (phase {to})"
        )),
        _ => None,
    }
}

#[test]
fn phases_never_call_back() {
    let dir = session_dir();
    let paths = support::rust_files(&dir);
    let mut texts = BTreeMap::new();
    for path in &paths {
        let relative = path.strip_prefix(&dir).expect("under session/");
        let name = relative.to_string_lossy().to_string();
        if name.ends_with("tests.rs") {
            continue;
        }
        assert!(
            phase(&name).is_some(),
            "session/{name} has no phase in PHASES and is not SHARED"
        );
        texts.insert(name, code(path));
    }
    let files: BTreeSet<String> = texts.keys().cloned().collect();
    let defined = methods(&texts);
    assert!(
        defined.len() > 40,
        "only {} methods found: is the reader broken?",
        defined.len()
    );
    let mut wrong: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut checked = 0;
    for (file, text) in &texts {
        // The root declares the phases and names what the server uses.
        if file == "mod.rs" {
            continue;
        }
        for target in uses(file, text, &files) {
            checked += 1;
            if let Some(why) = backward(file, &target) {
                wrong.entry(file.clone()).or_default().insert(why);
            }
        }
        let own_state = text.lines().any(opens_state);
        for (method, homes) in &defined {
            let called = RECEIVERS
                .iter()
                .chain(own_state.then_some(&"self."))
                .any(|receiver| text.contains(&format!("{receiver}{method}(")));
            if !called || homes.contains(file) {
                continue;
            }
            checked += 1;
            // Wrong only if every method of that name is behind.
            let why: Vec<_> = homes.iter().map(|home| backward(file, home)).collect();
            if let Some(Some(why)) = why.iter().all(Option::is_some).then(|| why[0].clone()) {
                wrong
                    .entry(file.clone())
                    .or_default()
                    .insert(format!("{why}: .{method}()"));
            }
        }
    }
    assert!(checked > 40, "only {checked} uses found");
    assert!(
        wrong.is_empty(),
        "calls back to an earlier phase: {wrong:#?}"
    );
}

#[test]
fn the_reader_sees_paths_groups_and_methods() {
    let files: BTreeSet<String> = [
        "admit.rs",
        "h2/mod.rs",
        "h2/to_h1.rs",
        "attempts/mod.rs",
        "attempts/hosts.rs",
        "attempts/policy.rs",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let text =
        "use super::{admit::{self, Admission}, Failure};\nuse crate::session::attempts::run;";
    let used = uses("h2/mod.rs", text, &files);
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["admit.rs", "attempts/mod.rs"]
    );
    let text = "use super::{unless_reset, Stream};\nuse crate::session::admit;";
    let used = uses("h2/to_h1.rs", text, &files);
    assert_eq!(used.into_iter().collect::<Vec<_>>(), ["admit.rs"]);
    let texts = BTreeMap::from([(
        "local.rs".to_string(),
        "impl<S: AsyncRead + AsyncWrite> Session<S> {\n    pub(super) async fn fail(\n        x\n    ) {}\n    fn write_answer<T>(&self) {}\n}\nimpl<S: AsyncRead> Wire for X<S> {\n    fn send(&self) {}\n}\nfn outside() {}".to_string(),
    )]);
    let found: Vec<_> = methods(&texts).into_keys().collect();
    assert_eq!(found, ["fail", "write_answer"]);
    assert_eq!(
        backward("admit.rs", "h1/mod.rs").as_deref(),
        Some("phase 1 calls back into h1/mod.rs (phase 0)")
    );
    assert_eq!(backward("h1/mod.rs", "admit.rs"), None);
    assert!(backward("h1/waits.rs", "h1/forward.rs").is_some());
}
