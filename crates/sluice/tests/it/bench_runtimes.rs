//! The CI smoke test of `sluice bench --only runtimes`: go-http and node,
//! and spring-mvc when java and Maven are installed (`SLUICE_BENCH_JVM=0`
//! leaves it out), each built on first use into ~/.cache/sluice/runtimes,
//! run through the four seeds' sections with 1 s rows, with nginx and
//! HAProxy when they are installed. It checks the report, never a speed.
//! From the cache it takes about 70 s here with spring-mvc (its four
//! starts, its discarded warm-up rounds), about 35 s without; a first
//! spring-mvc build adds its download from Maven Central.

use crate::common;

use std::time::Instant;

use bench::runtimes::{Toolchain, Toolchains};
use common::{bench, leftovers, schema_errors, scratch, text};
use serde_json::Value;
use testkit::Need;

/// The rows of the group named `name`.
fn rows<'a>(json: &'a Value, name: &str) -> &'a [Value] {
    json["groups"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["name"] == name))
        .and_then(|g| g["rows"].as_array())
        .map_or(&[], Vec::as_slice)
}

fn notes(json: &Value, name: &str) -> String {
    json["groups"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["name"] == name))
        .map_or(String::new(), |g| g["notes"].to_string())
}

/// The runtime names of the rows of group `name`.
fn backends(json: &Value, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in rows(json, name) {
        let backend = row["runtime"]["name"].as_str().unwrap_or_default();
        if !out.iter().any(|b| b == backend) {
            out.push(backend.to_string());
        }
    }
    out
}

#[test]
fn the_runtimes_group_reproduces_each_seed_section() {
    let test = "the_runtimes_group_reproduces_each_seed_section";
    let toolchains = Toolchains::detect();
    // A runtime or peer left out is a skip of that part: a SKIP line, or a
    // failure under SLUICE_STRICT=1.
    for (toolchain, runtime) in [
        (Toolchain::Go, "go-http"),
        (Toolchain::Node, "node"),
        (Toolchain::Jvm, "spring-mvc"),
    ] {
        if let Some(missing) = toolchains.missing(toolchain) {
            let reason = format!("{runtime} is only checked for its skip note: {missing}");
            testkit::skip(test, Need::Toolchain, &reason);
        }
    }
    if std::env::var("SLUICE_BENCH_JVM").as_deref() == Ok("0") {
        testkit::skip(
            test,
            Need::Toolchain,
            "spring-mvc left out: SLUICE_BENCH_JVM=0",
        );
    }
    for peer in ["nginx", "haproxy"] {
        if bench::find_program(peer).is_none() {
            let reason = format!("no {peer} rows: not installed (bash bench/install-peers.sh)");
            testkit::skip(test, Need::Peer, &reason);
        }
    }
    let jvm = toolchains.missing(Toolchain::Jvm).is_none()
        && std::env::var("SLUICE_BENCH_JVM").as_deref() != Ok("0");
    let mut asked = vec!["go-http", "node"];
    if jvm {
        asked.push("spring-mvc");
    }
    let present = |runtime: &str| match runtime {
        "go-http" => toolchains.missing(Toolchain::Go).is_none(),
        "node" => toolchains.missing(Toolchain::Node).is_none(),
        _ => jvm,
    };
    let out = scratch("runtimes");
    let started = Instant::now();
    let output = bench(
        &[
            "--only",
            "runtimes,peers",
            "--peers",
            "nginx,haproxy",
            "--runtimes",
            &asked.join(","),
            "--quick",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--users",
            "10,20",
            "--think",
            "100ms..200ms",
            "--downstream-delay",
            "50ms",
            "--rates",
            "200",
        ],
        &out,
        "runtimes",
        None,
    );
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    println!(
        "{asked:?} in {:.1}s\n{stderr}",
        started.elapsed().as_secs_f64()
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");

    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("JSON");
    let errors = schema_errors(&json);
    assert!(
        errors.is_empty(),
        "results.json breaks its schema: {errors:#?}"
    );
    let names: Vec<&str> = json["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "runtimes-hello",
            "runtimes-petstore",
            "runtimes-io",
            "runtimes-open"
        ]
    );
    assert_eq!(json["settings"]["runtimes"], serde_json::json!(asked));

    // Every row says what it ran on; a JVM row discarded one round, unless
    // it is a cold or warm row.
    for group in [
        "runtimes-hello",
        "runtimes-petstore",
        "runtimes-io",
        "runtimes-open",
    ] {
        for row in rows(&json, group) {
            let runtime = &row["runtime"];
            for field in ["name", "version", "framework"] {
                let value = runtime[field].as_str().unwrap_or_default();
                assert!(
                    !value.is_empty() && !value.contains('?'),
                    "{field} of {row}"
                );
            }
            let on_jvm = runtime["version"]
                .as_str()
                .is_some_and(|v| v.contains("JDK"));
            let expected = usize::from(on_jvm && row["phase"].is_null());
            assert_eq!(row["warmup_rounds"], expected, "{row}");
            // The discarded round is not among the measured ones (--quick: 1).
            assert_eq!(row["rounds"].as_array().map(Vec::len), Some(1), "{row}");
            // A cold row is the first second after a start: on a loaded
            // machine a JVM may answer nothing in it. Every other row has
            // answers.
            if row["phase"] != "cold" {
                assert!(row["requests"].as_u64().unwrap_or(0) > 0, "{row}");
            }
        }
    }

    // Each runtime is measured where it serves, or skipped with a note.
    let hello = backends(&json, "runtimes-hello");
    assert_eq!(hello.first().map(String::as_str), Some("sluice serve"));
    for runtime in &asked {
        if present(runtime) {
            assert!(hello.iter().any(|b| b == runtime), "{runtime}: {hello:?}");
            assert!(
                stderr.contains(&format!("{runtime}: built")),
                "no build progress for {runtime}: {stderr}"
            );
        } else {
            let skipped = format!("{runtime} skipped: ");
            assert!(notes(&json, "runtimes-hello").contains(&skipped), "{json}");
        }
    }
    if jvm {
        let discarded = stderr
            .lines()
            .filter(|l| l.contains("[warm-up, discarded]"))
            .count();
        let peers = ["nginx", "haproxy"]
            .iter()
            .filter(|p| bench::find_program(p).is_some())
            .count();
        // spring-mvc's hello, its petstore alone and behind each proxy, its
        // 2 io rows (alone, behind sluice) at 2 user counts.
        assert_eq!(discarded, 1 + (2 + peers) + 2 * 2, "{stderr}");
    }
    let petstore = rows(&json, "runtimes-petstore");
    for backend in backends(&json, "runtimes-petstore") {
        let behind = format!("sluice -> {backend} petstore");
        assert!(petstore.iter().any(|r| r["label"] == behind), "{behind}");
    }
    if jvm {
        let io = backends(&json, "runtimes-io");
        assert_eq!(io, ["sluice serve", "spring-mvc"]);
        // spring-mvc alone and behind sluice, sluice serve alone, at 2 points.
        assert_eq!(rows(&json, "runtimes-io").len(), 6);
        let open = rows(&json, "runtimes-open");
        let phases: Vec<&str> = open.iter().filter_map(|r| r["phase"].as_str()).collect();
        assert_eq!(phases, ["cold", "warm", "cold", "warm"]);
        assert!(open.iter().all(|r| r["load"]["warmup_s"] == 0.0));
    } else {
        for group in ["runtimes-io", "runtimes-open"] {
            assert!(rows(&json, group).is_empty());
            assert!(notes(&json, group).contains("none of this seed's runtimes"));
        }
    }

    // report.md: a section per seed with its table and the versions.
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let mut sections = vec![
        (
            "(seeds/001) (`runtimes-hello`)",
            "| Backend | Requests/sec |",
        ),
        (
            "(seeds/000 Q5) (`runtimes-petstore`)",
            "| Backend | alone req/s |",
        ),
    ];
    if jvm {
        sections.push((
            "(seeds/003) (`runtimes-io`)",
            "| users | backend | p95 | answered/s | failed | unanswered |",
        ));
        sections.push(("(seeds/004) (`runtimes-open`)", "| Backend | rate/s |"));
    }
    for (heading, table) in sections {
        let at = md
            .find(heading)
            .unwrap_or_else(|| panic!("no {heading}:\n{md}"));
        let section = &md[at..];
        let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
        assert!(section.contains(table), "{section}");
        assert!(section.contains("Versions:"), "{section}");
    }
    // The terminal's summary has a line per seed.
    assert!(
        stdout.contains("runtimes-hello (Hello world in each runtime (seeds/001)): sluice serve")
    );
    assert!(
        stdout.contains("behind ÷ alone, req/s: sluice serve sluice"),
        "{stdout}"
    );

    // report.html: well formed, a chart per seed with rows.
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&html, options).expect("well formed");
    let seed_charts = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter(|n| n.text().is_some_and(|t| t.contains("(seeds/")))
        .count();
    assert_eq!(seed_charts, if jvm { 4 } else { 2 });

    assert!(
        leftovers("runtimes").is_empty(),
        "{:?}",
        leftovers("runtimes")
    );
    let _ = std::fs::remove_dir_all(&out);
}
