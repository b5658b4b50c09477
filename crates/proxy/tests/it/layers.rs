//! The crate's layers (docs/ARCHITECTURE.md): each top-level module of
//! src/ has a layer, and a module may use only modules of lower layers.
//! This reads every `crate::…` path in the sources, including the names
//! inside `use crate::{…}` groups, and fails on an import that goes up or
//! sideways (which is also what makes a cycle impossible).

use crate::support;

use std::{collections::BTreeMap, fs, path::Path};

/// Top-level modules and their layers, bottom first.
const LAYERS: &[(&str, u8)] = &[
    ("config", 0),
    ("ids", 0),
    ("wire", 1),
    ("telemetry", 2),
    ("middleware", 3),
    ("upstream", 3),
    ("plan", 4),
    ("session", 5),
    ("server", 6),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// The top-level module of a file under src/ (`session/admit.rs` -> `session`).
fn owner(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .unwrap_or_default();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a source text names through `crate::`.
fn imports(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `use crate::{a::b, c, d::{e, f}}`: the first name of each item.
            let mut depth = 1;
            let mut item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ => {
                        if item_start && !name.is_empty() {
                            found.push(std::mem::take(&mut name));
                            item_start = false;
                        }
                    }
                }
            }
            if !name.is_empty() {
                found.push(name);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(name);
        }
        rest = after;
    }
    found
}

#[test]
fn imports_only_go_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = support::rust_files(&src);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let module = owner(relative);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer(&module) else {
            panic!(
                "src/{}: module `{module}` has no layer in LAYERS",
                relative.display()
            );
        };
        // Comments may name any module; only code counts.
        let text: String = fs::read_to_string(file)
            .expect("read a source")
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for used in imports(&text) {
            checked += 1;
            if used == module {
                continue;
            }
            match layer(&used) {
                Some(theirs) if theirs < own => {}
                Some(theirs) => wrong
                    .entry(relative.display().to_string())
                    .or_default()
                    .push(format!(
                        "{module} (layer {own}) uses {used} (layer {theirs})"
                    )),
                None => wrong
                    .entry(relative.display().to_string())
                    .or_default()
                    .push(format!("uses crate::{used}, which has no layer")),
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} imports found: is the parser broken?"
    );
    assert!(wrong.is_empty(), "imports that do not go down: {wrong:#?}");
}

#[test]
fn the_import_reader_sees_groups_and_paths() {
    let text = "use crate::{\n    config::{A, B},\n    ids::RouteId,\n    wire::edits::HeaderEdits,\n};\nlet x = crate::telemetry::escape(y);\nuse crate::plan::Plan;";
    assert_eq!(
        imports(text),
        ["config", "ids", "wire", "telemetry", "plan"]
    );
}

/// Files short enough to hold in one's head (issue 16): none over 500 lines.
#[test]
fn no_source_file_is_over_500_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = support::rust_files(&root);
    assert!(!files.is_empty());
    let long: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file).ok()?.lines().count();
            (lines > 500).then(|| format!("{} ({lines} lines)", file.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these files: {long:?}");
}

/// The crates of the workspace, each with its src/ directory.
pub(crate) fn workspace_crates() -> Vec<(String, std::path::PathBuf)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<_> = fs::read_dir(&crates)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let src = path.join("src");
            let name = path.file_name()?.to_string_lossy().to_string();
            src.is_dir().then_some((name, src))
        })
        .collect();
    found.sort();
    found
}

/// A cycle among `edges` (module -> modules it imports), as a path, if any.
fn find_cycle(edges: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        edges: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in edges.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = Default::default();
    edges
        .keys()
        .find_map(|module| visit(module, edges, &mut Vec::new(), &mut done))
}

/// Every crate's top-level modules import one another without a cycle
/// (issue 32): the same reading of `crate::` paths as above, over the
/// whole workspace. A cycle names its modules.
#[test]
fn no_crate_has_a_module_cycle() {
    let crates = workspace_crates();
    assert!(crates.len() >= 10, "{crates:?}");
    for (name, src) in crates {
        let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let files = support::rust_files(&src);
        let modules: std::collections::BTreeSet<String> = files
            .iter()
            .map(|f| owner(f.strip_prefix(&src).unwrap()))
            .filter(|m| m != "lib" && m != "main")
            .collect();
        for file in &files {
            let from = owner(file.strip_prefix(&src).unwrap());
            let text = fs::read_to_string(file).unwrap();
            for to in imports(&text) {
                if to != from && modules.contains(&to) {
                    edges.entry(from.clone()).or_default().push(to);
                }
            }
        }
        assert_eq!(find_cycle(&edges), None, "crates/{name}: a module cycle");
    }
    let cycle: BTreeMap<String, Vec<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), vec![b.to_string()]))
        .collect();
    assert_eq!(
        find_cycle(&cycle).map(|c| c.len()),
        Some(4),
        "the check finds a cycle of three"
    );
}

/// Every Rust file of the workspace, sources and tests alike (each
/// crate's `src/` and `tests/`, and the fuzz targets), is at most 500
/// lines: a file one can hold in one's head. Data (a JSON fixture, a
/// corpus) is not Rust and is not counted.
#[test]
fn no_rust_file_in_the_workspace_is_over_500_lines() {
    let root = fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
    let mut dirs: Vec<_> = workspace_crates()
        .into_iter()
        .flat_map(|(_, src)| [src.with_file_name("tests"), src])
        .collect();
    dirs.extend([root.join("fuzz/src"), root.join("fuzz/tests")]);
    let mut long = Vec::new();
    let mut counted = 0;
    for dir in dirs.iter().filter(|dir| dir.is_dir()) {
        for file in support::rust_files(dir) {
            counted += 1;
            let lines = fs::read_to_string(&file).unwrap().lines().count();
            if lines > 500 {
                let file = fs::canonicalize(&file).unwrap();
                let relative = file.strip_prefix(&root).unwrap_or(&file);
                long.push(format!("{} ({lines} lines)", relative.display()));
            }
        }
    }
    // The walk must have found the workspace, or the check proves nothing.
    assert!(
        counted > 300,
        "only {counted} Rust files found under {}",
        root.display()
    );
    long.sort();
    assert!(
        long.is_empty(),
        "split these files (500 lines at most): {long:#?}"
    );
}
