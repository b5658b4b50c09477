//! The report's outputs from the fixture: the terminal tables and summary,
//! report.md, results.json against its schema, the files written; report.html
//! in `html_page`.

mod html_page;

use super::*;
use crate::results::Results;
use html_page::check_html;

/// docs/results.schema.json, relative to this file.
const SCHEMA_JSON: &str = include_str!("../../../../../docs/results.schema.json");

fn emptied(mut results: Results) -> Results {
    for g in &mut results.groups {
        g.rows.clear();
    }
    results
}

#[test]
fn markdown_has_every_section_table_and_times_row() {
    let results = fixture();
    let md = markdown(&results);
    for needle in [
        "# sluice bench report",
        "## Machine",
        "| CPU | AMD Ryzen 7 2700 Eight-Core Processor |",
        "| nginx | 1.24.0 (/usr/sbin/nginx) |",
        "| Open-file limit | 1,048,576 |",
        "## Settings",
        "## Notes",
        "### Baseline Summary",
        "### Proxy Summary",
        "| Test Case | Max Throughput | Avg Latency | Transfer |",
        "| backend petstore | 412,345 | 310µs | 90.84MiB/s |",
        "| **Times (backend petstore ÷ sluice -> petstore)** | **2.16x** | **2.16x** | **2.16x** |",
        "## Backend alone (`baseline`)",
        "*What does adding the proxy in front of it cost?*",
        "| label | system | load | req/s | avg | p50 | p90 | p95 | p99 | p99.9 | max | transfer/s | sent | errors | unanswered | req/s min-max | peak RSS MiB | CPU s | CPU µs/req |",
        "| 12 (read 10, http 2) |",
        "sluice vs haproxy (best of 4 peers): 1.11x req/s",
        "| envoy | 1.40.0 (/root/.cache/sluice/peers/bin/envoy) |",
        "- nginx: worker_connections raised to 16384",
        "| connections | sluice req/s | sluice avg ms | nginx req/s |",
        "| users | sluice p95 ms | haproxy p95 ms |",
        "| rate/s | sluice cold p95 ms | sluice cold p99 ms | sluice warm p95 ms |",
        "HTTP/1.1 GET /1k c12,000 10s+2s",
        "think 100-500ms",
        "rate 4,000/s",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
    // The haproxy TLS listener row has no process figures.
    assert!(
        md.contains("| haproxy TLS listener | haproxy | HTTP/2 GET /v1/pets"),
        "{md}"
    );
    // Every group has its section, in order.
    let mut at = 0;
    for g in &results.groups {
        let heading = format!("## {} (`{}`)", g.title, g.name);
        let found = md[at..].find(&heading).map(|i| i + at);
        assert!(found.is_some(), "{heading} missing or out of order");
        at = found.unwrap_or(at);
    }
}

#[test]
fn terminal_tables_are_aligned_and_compare_systems() {
    let results = fixture();
    let proxy = group_table(&results.groups[1]);
    // Against the best peer of the row only, not each of them.
    assert!(
        proxy.contains("sluice vs haproxy (best of 4 peers): 1.11x req/s"),
        "{proxy}"
    );
    assert!(!proxy.contains("sluice vs nginx"), "{proxy}");
    assert!(!proxy.contains("sluice vs envoy"), "{proxy}");
    assert!(
        proxy.contains("errors in haproxy -> petstore: read 10, http 2"),
        "{proxy}"
    );
    // The runtimes groups show their seed's table (report::seeds checks it).
    for group in results.groups.iter().filter(|g| !seeds::is_seed(g)) {
        let table = group_table(group);
        let lines: Vec<&str> = table.lines().collect();
        // Header and rule have the same width: the columns line up.
        let rule = lines.iter().position(|l| l.starts_with("-----")).unwrap();
        let header = rule - 1;
        // The idle group's table is about memory, not load.
        let figure = if group.name == "idle" {
            "per connection"
        } else {
            "req/s"
        };
        assert!(lines[header].contains(figure), "{table}");
        for line in lines.iter().skip(header).take(group.rows.len() + 2) {
            assert!(
                line.chars().count() <= 130,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
    let lb = group_table(&results.groups[4]);
    assert!(
        lb.contains("connections 12,000: sluice vs haproxy (best of 2 peers):"),
        "{lb}"
    );
    let open = group_table(&results.groups[7]);
    assert!(
        open.contains("rate 4,000/s warm: sluice vs haproxy: 0.73x p95"),
        "{open}"
    );
    println!("{proxy}\n{lb}\n{open}");

    let summary = summary(&results);
    for needle in [
        "Baseline Summary",
        "Proxy Summary",
        "Test Case",
        "Max Throughput",
        "Times (backend petstore ÷ haproxy -> petstore)",
        "middleware (Middleware handlers): 6 rows; best sluice: no handlers",
        "lb (Load balancing over 5 backends): at connections 12,000: sluice 120,000 req/s",
        "io (IO-heavy passthrough): at users 5,000: sluice p95",
        "open (Open model): at rate 4,000/s (warm): sluice p95",
        "proxy",
    ] {
        assert!(
            summary.contains(needle),
            "missing {needle:?} in:\n{summary}"
        );
    }
    println!("{summary}");
}

/// In io and open, whose verdicts are on p95, the spread is p95's; the
/// throughput groups keep req/s.
#[test]
fn the_spread_is_of_the_figure_the_verdicts_are_on() {
    let results = fixture();
    let io = &results.groups[6];
    assert_eq!(io.name, "io");
    let md = build::rows_table(io, true).markdown();
    assert!(md.contains("| p95 min-max |"), "{md}");
    assert!(!md.contains("req/s min-max"), "{md}");
    for row in &io.rows {
        let (lo, hi) = row.spread(|f| f.latency.p95_us as f64);
        assert!(lo < hi, "{}: the fixture's rounds differ", row.label);
        let cell = format!("| {}-{} |", crate::fmt::micros(lo), crate::fmt::micros(hi));
        assert!(md.contains(&cell), "{cell} missing in:\n{md}");
    }
    let open = build::rows_table(&results.groups[7], true).markdown();
    assert!(open.contains("| p95 min-max |"), "{open}");
    let terminal = group_table(io);
    assert!(terminal.contains(" p95 ±%"), "{terminal}");
    let proxy = build::rows_table(&results.groups[1], true).markdown();
    assert!(proxy.contains("| req/s min-max |"), "{proxy}");
    assert!(proxy.contains("| 184,797-194,322 |"), "{proxy}");
}

/// A verdict's ratio stands only when every round (round i of one row
/// against round i of the other) is on the same side of 1x as the medians,
/// or every round is a tie; otherwise the line says the rounds disagree
/// and gives no ratio.
#[test]
fn verdicts_name_their_confidence() {
    let mut results = fixture();
    let proxy = &mut results.groups[1];
    let table = group_table(proxy);
    assert!(
        table.contains("sluice vs haproxy (best of 4 peers): 1.11x req/s (3/3 rounds agree)"),
        "{table}"
    );
    // HAProxy beats sluice's first round in its own first round.
    let haproxy = proxy
        .rows
        .iter_mut()
        .find(|r| r.system == "haproxy")
        .expect("a haproxy row");
    haproxy.rounds[0].requests_per_sec = 200_000.0;
    let table = group_table(proxy);
    assert!(
        table.contains("sluice vs haproxy (best of 4 peers): req/s: rounds disagree (0.92x-1.11x)"),
        "{table}"
    );
    assert!(!table.contains("1.11x req/s"), "{table}");
    // On p95 where the verdict is on p95: haproxy is faster than sluice
    // in two rounds at 300 users, though slower in the median.
    let io = &mut results.groups[6];
    for row in io.rows.iter_mut().filter(|r| r.system == "haproxy") {
        if row.sweep.as_ref().is_some_and(|s| s.value == 300.0) {
            row.rounds[0].latency.p95_us = 1;
            row.rounds[2].latency.p95_us = 1;
        }
    }
    let table = group_table(io);
    assert!(
        table.contains("users 300: sluice vs haproxy: p95: rounds disagree"),
        "{table}"
    );
    assert!(
        table.contains("users 5,000: sluice vs haproxy: 0.90x p95 (a tie in 3/3 rounds)"),
        "{table}"
    );
    // The same answered rate in every round: a tie, said as one.
    assert!(
        table.contains("1.00x answered req/s (a tie in 3/3 rounds)"),
        "{table}"
    );
    // Markdown and HTML say the same.
    assert!(markdown(&results).contains("p95: rounds disagree"));
    assert!(html(&results).contains("req/s: rounds disagree (0.92x-1.11x)"));
}

/// A row that is not comparable is marked in its table, says why under
/// it, and stands in no verdict.
#[test]
fn rows_that_are_not_comparable_are_marked_and_left_out_of_verdicts() {
    let mut results = fixture();
    let io = &mut results.groups[6];
    let sluice = io
        .rows
        .iter_mut()
        .find(|r| r.system == "sluice" && r.sweep.as_ref().is_some_and(|s| s.value == 5000.0))
        .expect("sluice at 5,000");
    sluice.not_comparable = vec!["window shorter than its latency: test".into()];
    let table = group_table(io);
    assert!(
        table.contains("* not comparable: sluice users=5000: window shorter"),
        "{table}"
    );
    assert!(
        table.contains(
            "users 5,000: sluice vs haproxy: not comparable (sluice not: see the rows marked *)"
        ),
        "{table}"
    );
    let md = markdown(&results);
    assert!(md.contains("| sluice users=5000 * | sluice |"), "{md}");
    assert!(md.contains("Not comparable:"), "{md}");
    let summary = summary(&results);
    assert!(summary.contains("sluice * p95"), "{summary}");
    assert!(
        summary.contains("1 row not comparable (marked *)"),
        "{summary}"
    );
}

/// The fixture's rows are marked as the bench marks them.
#[test]
fn the_fixture_marks_what_the_window_rules_mark() {
    for group in fixture().groups {
        for row in &group.rows {
            assert_eq!(
                row.not_comparable,
                crate::window::reasons(&row.rounds),
                "{}: {}",
                group.name,
                row.label
            );
        }
    }
}

/// The idle group compares memory per connection, not load it never ran.
#[test]
fn idle_rows_compare_bytes_per_connection() {
    let results = fixture();
    let idle = &results.groups[8];
    assert_eq!(idle.name, "idle");
    let table = group_table(idle);
    // Against the peer whose idle connections cost the least.
    for line in [
        "HTTP/1.1 @ 1,000: sluice vs nginx (best of 2 peers): 3.05x bytes per idle connection",
        "HTTP/2 @ 10,000: sluice vs nginx (best of 2 peers): 3.05x bytes per idle connection",
    ] {
        assert!(table.contains(line), "{line} missing in:\n{table}");
    }
    assert!(!table.contains("vs haproxy"), "{table}");
    assert!(!table.contains("req/s"), "{table}");
}

/// lb-slow sets each of sluice's policies against the best peer's.
#[test]
fn each_sluice_policy_meets_the_best_peer_in_lb_slow() {
    let results = fixture();
    let slow = &results.groups[5];
    assert_eq!(slow.name, "lb-slow");
    let lines = compare::ratios(slow);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines.contains(
            &"sluice least_request vs haproxy least_conn (best of 2 peers): 1.06x req/s \
              (3/3 rounds agree), 0.95x avg (a tie in 3/3 rounds), 0.95x p99 latency (a tie \
              in 3/3 rounds)"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("least_conn:")),
        "{lines:#?}"
    );
}

#[test]
fn results_json_matches_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let results = fixture();
    let instance: serde_json::Value = serde_json::from_str(&json(&results).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // An empty run too.
    let empty: serde_json::Value = serde_json::to_value(emptied(fixture())).unwrap();
    assert!(validator.is_valid(&empty));

    // Strict: a wrong schema name, an unknown field, a missing field fail.
    let mut wrong = instance.clone();
    wrong["schema"] = "sluice-bench/1".into();
    assert!(!validator.is_valid(&wrong));
    let mut extra = instance.clone();
    extra["groups"][0]["rows"][0]["surprise"] = 1.into();
    assert!(!validator.is_valid(&extra));
    let mut missing = instance.clone();
    if let Some(m) = missing["machine"].as_object_mut() {
        m.remove("cores");
    }
    assert!(!validator.is_valid(&missing));
    let mut negative = instance;
    negative["groups"][0]["rows"][0]["requests"] = (-1).into();
    assert!(!validator.is_valid(&negative));

    // And it reads back.
    let back: Results = serde_json::from_str(&json(&results).unwrap()).unwrap();
    assert_eq!(back.groups.len(), 13);
    assert_eq!(back.groups[9].rows[1].warmup_rounds, 1);
}

#[test]
fn empty_groups_render() {
    let results = emptied(fixture());
    for g in &results.groups {
        assert!(group_table(g).contains("(no rows)"));
    }
    let s = summary(&results);
    assert!(s.contains("(no baseline rows)"), "{s}");
    assert!(
        s.contains("lb (Load balancing over 5 backends): no rows"),
        "{s}"
    );
    let md = markdown(&results);
    assert!(md.contains("No rows."), "{md}");
    let html = html(&results);
    assert_eq!(check_html(&html), Ok(0));
    assert!(html.contains("Concurrency sweep charts: the lb group has no rows."));

    let mut nothing = fixture();
    nothing.groups.clear();
    nothing.notes.clear();
    nothing.machine.peers.clear();
    assert!(markdown(&nothing).contains("| Peers | none on PATH |"));
    assert_eq!(check_html(&super::html(&nothing)), Ok(0));
    assert!(summary(&nothing).contains("Proxy Summary"));
}

/// `SLUICE_REPORT_FIXTURE_OUT=DIR cargo test -p bench --lib report` also
/// writes the fixture's report into DIR, to look at it in a browser.
#[test]
fn write_all_writes_three_files() {
    if let Some(dir) = std::env::var_os("SLUICE_REPORT_FIXTURE_OUT") {
        write_all(&fixture(), Path::new(&dir)).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("sluice-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("nested");
    write_all(&fixture(), &out).unwrap();
    for name in ["report.md", "results.json", "report.html"] {
        let len = std::fs::metadata(out.join(name)).unwrap().len();
        assert!(len > 1000, "{name}: {len} bytes");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each seed's section in report.md (table, versions, notes), its line in
/// the summary and its chart in report.html.
#[test]
fn each_seed_has_its_section_chart_and_summary_line() {
    let results = fixture();
    let md = markdown(&results);
    for (heading, table_head) in [
        ("## Hello world in each runtime (seeds/001) (`runtimes-hello`)", "| Backend | Requests/sec |"),
        ("## Each runtime's petstore, alone and behind a proxy (seeds/000 Q5) (`runtimes-petstore`)", "| Backend | alone req/s |"),
        ("## Blocking vs non-blocking passthrough (seeds/003) (`runtimes-io`)", "| users | backend | p95 |"),
        ("## Customers at an open arrival rate, cold and warm (seeds/004) (`runtimes-open`)", "| Backend | rate/s |"),
    ] {
        let at = md.find(heading).unwrap_or_else(|| panic!("no {heading} in:\n{md}"));
        let section = &md[at..];
        let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
        let section = &section[..end];
        assert!(section.contains(table_head), "{section}");
        assert!(section.contains("Versions:"), "{section}");
        assert!(section.contains("Every row:"), "{section}");
        // The generic pivot does not apply: every backend is `backend`.
        assert!(!section.contains("backend p95 ms"), "{section}");
    }
    assert!(md.contains("- node skipped: node is not on PATH"), "{md}");
    let text = summary(&results);
    assert!(
        text.contains(
            "runtimes-hello (Hello world in each runtime (seeds/001)): sluice serve 512,004 req/s"
        ),
        "{text}"
    );
    assert!(text.contains("runtimes-open (Customers at an open arrival rate, cold and warm (seeds/004)): at 2,000 req/s"), "{text}");

    let html = html(&results);
    for title in [
        "Hello world in each runtime (seeds/001): requests/s, pipelined 16 deep (log scale)",
        "Each runtime's petstore, alone and behind a proxy (seeds/000 Q5): requests/s alone and behind each proxy (log scale)",
        "Blocking vs non-blocking passthrough (seeds/003): p95 latency vs users (behind sluice dashed)",
        "Customers at an open arrival rate, cold and warm (seeds/004): mean latency, cold and warm (log scale)",
    ] {
        assert!(html.contains(&format!("<title>{}</title>", crate::report::table::esc(title))), "no chart {title}");
    }
    // The memory chart keeps to the other groups.
    assert!(!html.contains("runtimes-io: backend (highest over the sweep)"));
}

#[test]
fn a_seed_without_rows_says_so_in_report_md() {
    let md = markdown(&emptied(fixture()));
    assert!(md.contains("(`runtimes-io`)\n\n*p95?*\n\nNo rows."), "{md}");
}
