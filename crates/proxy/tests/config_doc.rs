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
