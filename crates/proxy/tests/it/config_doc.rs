//! docs/CONFIG.md stays true: its example parses and its sample errors are
//! what the parser prints.

use std::path::Path;

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md"))
        .expect("docs/CONFIG.md")
}

fn example() -> String {
    let doc = doc();
    let after = doc.split("## Example").nth(1).expect("an Example section");
    let body = after.split("```yaml\n").nth(1).expect("a yaml block");
    body.split("```")
        .next()
        .expect("a closed block")
        .to_string()
}

#[test]
fn the_documented_example_parses() {
    let config = proxy::config::parse(&example(), Path::new("sluice.yaml"), |_| None).unwrap();
    assert_eq!(
        config.upstreams["petstore"].hosts[0].value.url,
        "http://127.0.0.1:8080"
    );
}

#[test]
fn the_documented_errors_are_the_real_ones() {
    let doc = doc();
    let example = example();
    let misspelt = example.replace("    retries: 2", "    retires: 2");
    let err = proxy::config::parse(&misspelt, Path::new("sluice.yaml"), |_| None).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with("sluice.yaml:8:5: upstreams.petstore.retires: unknown field `retires`"),
        "{shown}"
    );
    assert!(shown.ends_with("did you mean `retries`?"), "{shown}");
    assert!(doc.contains(&shown), "docs/CONFIG.md should show:\n{shown}");

    let dangling = example.replace(
        "upstream: petstore }\n  - { path: /,",
        "upstream: petshop }\n  - { path: /,",
    );
    let err = proxy::config::parse(&dangling, Path::new("sluice.yaml"), |_| None).unwrap_err();
    let shown = err.to_string();
    assert!(doc.contains(&shown), "docs/CONFIG.md should show:\n{shown}");
}

/// The keys the parser lists for a misspelt key in `misspelt` (the
/// example with one line changed): "expected one of a, b, c".
fn keys_expected(misspelt: &str) -> Vec<String> {
    let err = proxy::config::parse(misspelt, Path::new("sluice.yaml"), |_| None)
        .expect_err("a misspelt key");
    let shown = err.to_string();
    let list = shown
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("{shown}"));
    let list = list.split(';').next().unwrap_or_default();
    list.split(',')
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect()
}

/// The default column of the table row for `key`.
fn documented_default(doc: &str, key: &str) -> String {
    let row = format!("| `{key}` |");
    let line = doc
        .lines()
        .find(|l| l.starts_with(&row))
        .unwrap_or_else(|| panic!("docs/CONFIG.md has no row for `{key}`"));
    line.split(" | ").nth(2).unwrap_or_default().to_string()
}

#[test]
fn every_upstream_key_is_documented_with_its_default() {
    let doc = doc();
    let example = example();
    let upstream = keys_expected(&example.replace("    retries: 2", "    retires: 2"));
    let timeouts = keys_expected(&example.replace("{ connect: 1s,", "{ conect: 1s,"));
    let health = keys_expected(&example.replace("    retries: 2", "    health: { falures: 1 }"));
    let keys = upstream
        .iter()
        .cloned()
        .chain(timeouts.iter().map(|k| format!("timeouts.{k}")))
        .chain(health.iter().map(|k| format!("health.{k}")));
    for key in keys {
        assert!(
            doc.contains(&format!("`upstreams.NAME.{key}")),
            "docs/CONFIG.md does not document upstreams.NAME.{key}"
        );
    }
    // The defaults of the keys that keep a saturated host served.
    let config = proxy::config::parse(&example, Path::new("sluice.yaml"), |_| None).unwrap();
    let petstore = &config.upstreams["petstore"];
    let documented = |key: &str| documented_default(&doc, &format!("upstreams.NAME.{key}"));
    assert_eq!(
        documented("max_connecting"),
        format!("`{}`", petstore.max_connecting)
    );
    assert_eq!(
        documented("timeouts.queue"),
        format!("`{}s`", petstore.timeouts.queue.as_secs())
    );
    assert_eq!(
        documented("health.panic_threshold"),
        format!("`{}`", petstore.health.panic_threshold)
    );
}

#[test]
fn every_traces_key_is_documented() {
    let doc = doc();
    let base = format!(
        "{}traces: {{ otlp: {{ endpoint: \"http://c:4317\" }} }}\n",
        example()
    );
    let top = keys_expected(&base.replace("traces: {", "traces: { servce_name: x,"));
    let otlp = keys_expected(&base.replace("otlp: {", "otlp: { timout: 1s,"));
    let sampler = keys_expected(&base.replace("traces: {", "traces: { sampler: { ratio: 1 },"));
    let keys = top
        .iter()
        .map(|k| format!("traces.{k}"))
        .chain(otlp.iter().map(|k| format!("traces.otlp.{k}")))
        .chain(sampler.iter().map(|k| format!("traces.sampler.{k}")));
    // A map key (`otlp`, `sampler`) is documented by its own keys' rows.
    for key in keys {
        assert!(
            doc.contains(&format!("| `{key}")),
            "docs/CONFIG.md does not document {key}"
        );
    }
    // A bad value names the file, line and key.
    let bad = base.replace(
        "traces: {",
        "traces: { sampler: { parent_based_ratio: 1.5 },",
    );
    let shown = proxy::config::parse(&bad, Path::new("sluice.yaml"), |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        shown.starts_with("sluice.yaml:") && shown.contains("traces.sampler.parent_based_ratio"),
        "{shown}"
    );
    assert!(shown.contains("between 0 and 1"), "{shown}");
    // A bad SDK variable is a bad configuration, named.
    let shown = proxy::config::parse(&base, Path::new("sluice.yaml"), |name| {
        (name == "OTEL_TRACES_SAMPLER").then(|| "jaeger_remote".to_string())
    })
    .unwrap_err()
    .to_string();
    assert!(
        shown.contains("traces") && shown.contains("OTEL_TRACES_SAMPLER"),
        "{shown}"
    );
}

/// A row of a key table (`| key | ...` or `` | `redis.` key | ... ``):
/// the keys its first cell names, and the whole row.
struct Row {
    keys: Vec<String>,
    text: String,
}

/// The rows of `doc`'s key tables, their keys prefixed by `prefix` and,
/// under a `## NAME` heading when `by_section`, by `NAME.`. In a cell
/// `` `a.b.c`, `.d` `` the second is `a.b.d`.
fn key_rows(doc: &str, prefix: &str, by_section: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let (mut section, mut table) = (String::new(), None::<String>);
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim().to_string();
        }
        if !line.starts_with('|') {
            table = None;
            continue;
        }
        let first = line
            .split(" | ")
            .next()
            .unwrap_or_default()
            .trim_start_matches("| ");
        if first == "key" || first.ends_with(".` key") {
            table = Some(
                first
                    .strip_suffix(" key")
                    .unwrap_or_default()
                    .replace('`', ""),
            );
            continue;
        }
        let Some(within) = &table else { continue };
        if line.starts_with("|--") || line.starts_with("| --") {
            continue;
        }
        let names: Vec<&str> = first.split('`').skip(1).step_by(2).collect();
        let mut keys = Vec::new();
        for name in &names {
            let full = match (name.strip_prefix('.'), keys.first()) {
                (Some(sibling), Some(first)) => {
                    let first: &String = first;
                    let parent = first.rsplit_once('.').map_or("", |(p, _)| p);
                    format!("{parent}.{sibling}")
                }
                _ => {
                    let section = match by_section {
                        true => format!("{section}."),
                        false => String::new(),
                    };
                    format!("{prefix}{section}{within}{name}")
                }
            };
            keys.push(full);
        }
        rows.push(Row {
            keys,
            text: line.to_string(),
        });
    }
    rows
}

fn middleware_doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/MIDDLEWARE.md"))
        .expect("docs/MIDDLEWARE.md")
}

/// `text` has `word` as a whole word (letters, digits and `_` around it).
fn has_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// Every key of the generated schema is documented (docs/CONFIG.md, and
/// docs/MIDDLEWARE.md for handler settings), and every documented key is
/// one of the schema's. A key counts as documented when a row names it or
/// a key below it, or when the row of its nearest documented parent
/// names each step down to it (`routes[].redirect`'s
/// `{scheme, hostname, port, path, status}`).
#[test]
fn every_key_is_documented_both_ways() {
    let schema = proxy::config::json_schema();
    let keys = super::config_schema::keys::of_schema(&schema);
    let mut rows = key_rows(&doc(), "", false);
    rows.extend(key_rows(&middleware_doc(), "middleware.NAME.", true));
    let handlers: Vec<String> = middleware_doc()
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| format!("middleware.NAME.{}", h.trim()))
        .filter(|k| keys.contains(k))
        .collect();
    let named: std::collections::BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.keys.iter().map(String::as_str))
        .chain(handlers.iter().map(String::as_str))
        .collect();
    let unknown: Vec<&&str> = named.iter().filter(|k| !keys.contains(**k)).collect();
    assert!(
        unknown.is_empty(),
        "documented, but not keys of the configuration: {unknown:#?}"
    );
    let row_of = |key: &str| rows.iter().find(|r| r.keys.iter().any(|k| k == key));
    let undocumented: Vec<&String> = keys
        .iter()
        .filter(|key| {
            let below = format!("{key}.");
            let items = format!("{key}[]");
            if named.contains(key.as_str())
                || named
                    .iter()
                    .any(|n| n.starts_with(&below) || n.starts_with(&items))
            {
                return false;
            }
            // The nearest parent with a row, and the steps below it.
            let steps: Vec<&str> = key.split('.').collect();
            let nearest = (1..steps.len()).rev().find_map(|at| {
                let parent = steps[..at].join(".");
                row_of(&parent)
                    .or_else(|| row_of(parent.trim_end_matches("[]")))
                    .map(|row| (row, at))
            });
            match nearest {
                Some((row, at)) => !steps[at..]
                    .iter()
                    .map(|s| s.trim_end_matches("[]"))
                    .all(|s| s == "NAME" || has_word(&row.text, s)),
                None => true,
            }
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "keys docs/CONFIG.md (or docs/MIDDLEWARE.md) does not document: {undocumented:#?}"
    );
}
