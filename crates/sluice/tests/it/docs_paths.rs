//! Docs that cannot drift (issue 50): every repository path, Rust file,
//! relative link and `sluice` command that README.md, docs/ and the
//! forks' SLUICE.md name exists, with every flag it uses; README's layout
//! names every crate and top-level entry.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use regex::Regex;

/// Named in a doc, and not a file of the repository on purpose.
const NOT_PATHS: &[(&str, &str)] = &[
    ("fuzz/corpus/", "cargo fuzz's own corpus, ignored by git"),
    ("deploy/sluice", "kubectl's name of the Deployment"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, docs/*.md, the forks' SLUICE.md: (name, text).
fn docs() -> Vec<(String, String)> {
    let root = root();
    let mut names = vec!["README.md".to_string()];
    for dir in ["docs", "vendor/h2", "vendor/quinn-proto"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                names.push(format!("{dir}/{name}"));
            }
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).unwrap();
            (name, text)
        })
        .collect()
}

/// Every file under `dir` (relative to the root), without build output.
fn files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        if entry.file_type().unwrap().is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "node_modules" | "corpus") {
                files(&path, out);
            }
        } else {
            out.push(path.to_string_lossy().into_owned());
        }
    }
}

/// `pattern` (`*` within one segment) matches a file or directory.
fn glob_matches(pattern: &str, all: &[String]) -> bool {
    let regex = format!(
        "^{}(/.*)?$",
        regex::escape(pattern.trim_end_matches('/')).replace("\\*", "[^/]*")
    );
    let regex = Regex::new(&regex).unwrap();
    all.iter().any(|f| regex.is_match(f))
}

/// A placeholder, not a name: `TARGET`, `NAME.rs`, `...` (asked only of
/// a path that is not there: `SLUICE.md` is a file).
fn placeholder(path: &str) -> bool {
    path.split('/').any(|segment| {
        let stem = segment.split('.').next().unwrap_or_default();
        segment.contains("...")
            || segment.contains('…')
            || segment.contains('<')
            || segment.contains('{')
            || (stem.len() > 1 && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    })
}

#[test]
fn every_path_and_link_a_doc_names_exists() {
    let root = root();
    let mut all = Vec::new();
    for dir in [
        "crates", "docs", "bench", "examples", "deploy", "fuzz", "specs", "vendor", ".ci",
    ] {
        files(Path::new(dir), &mut all);
    }
    let rust: Vec<&String> = all.iter().filter(|f| f.ends_with(".rs")).collect();
    let path = Regex::new(
        r"(?:^|[^A-Za-z0-9_./~-])((?:\.ci|crates|docs|bench|examples|deploy|fuzz|specs|vendor)/[A-Za-z0-9_./*-]*[A-Za-z0-9_/*-])",
    )
    .unwrap();
    let rust_file =
        Regex::new(r"(?:^|[^A-Za-z0-9_./-])([a-z0-9_]+(?:/[a-z0-9_]+)*\.rs)\b").unwrap();
    let link = Regex::new(r"\]\(([^)#\s]+)(?:#[^)]*)?\)").unwrap();
    let mut missing = BTreeSet::new();
    for (doc, text) in docs() {
        for (n, line) in text.lines().enumerate() {
            let at = format!("{doc}:{}", n + 1);
            for found in path.captures_iter(line) {
                let named = found[1].trim_end_matches('.');
                let exists = match named.contains('*') {
                    true => glob_matches(named, &all),
                    false => root.join(named).exists(),
                };
                let excused = placeholder(named) || NOT_PATHS.iter().any(|(p, _)| *p == named);
                if !exists && !excused {
                    missing.insert(format!("{at}: {named}"));
                }
            }
            // A Rust file named by its path within a crate (`server/h2.rs`).
            for found in rust_file.captures_iter(line) {
                let named = &found[1];
                let tail = format!("/{named}");
                if !rust.iter().any(|f| f.ends_with(&tail) || *f == named) {
                    missing.insert(format!("{at}: {named}"));
                }
            }
            for found in link.captures_iter(line) {
                let target = &found[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let base = Path::new(&doc).parent().unwrap_or(Path::new(""));
                if !root.join(base).join(target).exists() {
                    missing.insert(format!("{at}: link {target}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "named but not there: {missing:#?}");
}

#[test]
fn the_readme_layout_names_every_crate_and_top_level_entry() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let layout = readme
        .split("## Layout")
        .nth(1)
        .and_then(|after| after.split("```").nth(1))
        .expect("README.md has a Layout block");
    let named: BTreeSet<&str> = layout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut expected = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        expected.push(format!("crates/{name}"));
    }
    for dir in [
        "specs/",
        "bench/",
        "deploy/",
        "docs/",
        "examples/",
        "fuzz/",
        "vendor/",
        ".ci/run",
    ] {
        expected.push(dir.to_string());
    }
    let missing: Vec<&String> = expected
        .iter()
        .filter(|e| !named.contains(e.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's layout leaves out {missing:?}"
    );
}

/// `sluice WORDS --help`, remembered.
fn help<'a>(cache: &'a mut BTreeMap<Vec<String>, String>, words: &[String]) -> &'a str {
    cache.entry(words.to_vec()).or_insert_with(|| {
        let output = Command::new(crate::common::sluice())
            .args(words)
            .arg("--help")
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The subcommands a `--help` lists under `Commands:`.
fn subcommands(help: &str) -> Vec<String> {
    let listed = Regex::new(r"^  ([a-z][a-z0-9-]*)\s").unwrap();
    help.split("Commands:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("  "))
        .filter_map(|l| listed.captures(l).map(|c| c[1].to_string()))
        .collect()
}

/// The `sluice ...` commands of `text`: code spans that begin with one,
/// and lines of code blocks (continuation lines joined), each cut at the
/// first `|`, `&&`, `;`, redirection, comment or `--`.
fn commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let start = Regex::new(
        r"^(?:\$ |sudo |[A-Z_]+=\S+ )*(?:target/(?:release|debug)/|/usr/(?:local/)?bin/|\./)?sluice((?:\s+\S+)*)",
    )
    .unwrap();
    let span = Regex::new(r"`([^`]+)`").unwrap();
    let mut found = Vec::new();
    let (mut in_block, mut continued) = (false, String::new());
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let candidates: Vec<String> = if in_block {
            if let Some(head) = line.trim_end().strip_suffix('\\') {
                continued.push_str(head);
                continued.push(' ');
                continue;
            }
            vec![std::mem::take(&mut continued) + line]
        } else {
            span.captures_iter(line).map(|c| c[1].to_string()).collect()
        };
        for candidate in candidates {
            let Some(command) = start.captures(candidate.trim()) else {
                continue;
            };
            let words: Vec<String> = command[1]
                .split_whitespace()
                .take_while(|w| {
                    !matches!(*w, "|" | "&&" | ";" | "&" | "--" | "2>" | ">")
                        && !w.starts_with('#')
                        && !w.starts_with('>')
                })
                .map(str::to_string)
                .collect();
            found.push((n + 1, words));
        }
    }
    found
}

#[test]
fn every_sluice_command_a_doc_shows_exists_with_its_flags() {
    let mut cache = BTreeMap::new();
    let top = subcommands(help(&mut cache, &[]));
    assert!(top.contains(&"proxy".to_string()), "{top:?}");
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for (doc, text) in docs() {
        for (n, words) in commands(&text) {
            let Some(first) = words.first() else { continue };
            let mut path: Vec<String> = Vec::new();
            if !first.starts_with('-') {
                if !top.contains(first) {
                    // A name (`sluice bare proxy` in a table), unless it
                    // has flags, which only a command has.
                    if words.iter().any(|w| w.starts_with('-')) && !first.ends_with(':') {
                        wrong.push(format!("{doc}:{n}: no subcommand `{first}`"));
                    }
                    continue;
                }
                path.push(first.clone());
                for word in &words[1..] {
                    if word.starts_with('-') || !subcommands(help(&mut cache, &path)).contains(word)
                    {
                        break;
                    }
                    path.push(word.clone());
                }
            }
            let listing = help(&mut cache, &path).to_string();
            for word in words.iter().filter(|w| w.starts_with("--")) {
                let flag = word.split('=').next().unwrap_or_default();
                let flag = flag.trim_end_matches([',', '.', ':']);
                let listed =
                    Regex::new(&format!("{}(?:[^a-z0-9-]|$)", regex::escape(flag))).unwrap();
                checked += 1;
                if !listed.is_match(&listing) {
                    wrong.push(format!(
                        "{doc}:{n}: `sluice {}` has no {flag}",
                        path.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} flags found: is the parser right?"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
