use super::*;
use crate::results::Results;

/// docs/results.schema.json, relative to this file.
const SCHEMA_JSON: &str = include_str!("../../../../docs/results.schema.json");

/// Parses report.html as XML and checks that it is self-contained;
/// returns the number of `<svg class="chart">` elements.
fn check_html(html: &str) -> Result<usize, String> {
    let doc = parse(html).map_err(|e| format!("not well-formed: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "html" {
        return Err(format!("root element is <{}>", root.tag_name().name()));
    }
    let mut charts = 0;
    for node in doc.descendants().filter(|n| n.is_element()) {
        let name = node.tag_name().name();
        if matches!(
            name,
            "script" | "link" | "img" | "iframe" | "object" | "embed"
        ) {
            return Err(format!("<{name}> in a self-contained report"));
        }
        for attr in node.attributes() {
            let v = attr.value();
            if v.contains("//") || v.contains("url(") {
                return Err(format!("<{name} {}=\"{v}\"> refers outside", attr.name()));
            }
        }
        if name == "svg" && node.attribute("class") == Some("chart") {
            let titled = node
                .children()
                .any(|c| c.is_element() && c.tag_name().name() == "title" && c.text().is_some());
            if !titled {
                return Err("a chart without a <title>".into());
            }
            charts += 1;
        }
    }
    let stripped = html
        .replace("http://www.w3.org/1999/xhtml", "")
        .replace("http://www.w3.org/2000/svg", "");
    if stripped.contains("http://") || stripped.contains("https://") {
        return Err("an http(s):// reference besides the namespaces".into());
    }
    Ok(charts)
}

/// roxmltree refuses a DOCTYPE unless told to allow it.
fn parse(xml: &str) -> Result<roxmltree::Document<'_>, roxmltree::Error> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(xml, options)
}

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
        "| label | system | load | req/s | avg | p50 | p90 | p95 | p99 | p99.9 | max | transfer/s | errors | req/s min-max | peak RSS MiB | CPU s | CPU µs/req |",
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
        let cell = format!("| {}-{} |", fmt::micros(lo), fmt::micros(hi));
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

/// A verdict says in how many rounds the compared systems stood on the
/// same sides as their medians do.
#[test]
fn verdicts_count_the_rounds_that_agree_with_them() {
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
        table.contains("sluice vs haproxy (best of 4 peers): 1.11x req/s (2/3 rounds agree)"),
        "{table}"
    );
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
        table.contains("users 300: sluice vs haproxy: 0.99x p95 (1/3 rounds agree)"),
        "{table}"
    );
    assert!(
        table.contains("users 5,000: sluice vs haproxy: 0.90x p95 (3/3 rounds agree)"),
        "{table}"
    );
    // Markdown and HTML say the same.
    assert!(markdown(&results).contains("(1/3 rounds agree)"));
    assert!(html(&results).contains("(2/3 rounds agree)"));
}

/// Every bar of the throughput, latency and RSS charts names its row's
/// system, once: "baseline: backend: petstore (sluice serve)", "lb-slow:
/// sluice round_robin", "protocols: sluice: h1 -> h1".
#[test]
fn every_bar_names_its_system_once() {
    let mut results = fixture();
    // A baseline row labelled as the bench labels it.
    let mut backend = results.groups[0].rows[0].clone();
    backend.label = "petstore (sluice serve)".into();
    results.groups[0].rows.push(backend);
    let charts = [
        ("throughput", html::throughput_bars(&results)),
        ("latency", html::latency_bars(&results)),
        ("RSS", html::rss_bars(&results)),
    ];
    let mut labels = Vec::new();
    for (chart, bars) in &charts {
        assert!(!bars.is_empty(), "{chart}");
        for (system, bar) in bars {
            let found = bar.label.matches(system).count();
            assert_eq!(
                found, 1,
                "{chart}: {:?} names {system} {found} times",
                bar.label
            );
            labels.push(bar.label.as_str());
        }
    }
    for label in [
        "baseline: backend: petstore (sluice serve)",
        "baseline: nginx petstore body",
        "protocols: sluice: h1 -> h1",
        "lb-slow: sluice round_robin",
        "lb-slow: haproxy least_conn",
        "idle: nginx HTTP/2 @ 10000",
        "lb: haproxy (highest over the sweep)",
    ] {
        assert!(labels.contains(&label), "no bar {label:?} in {labels:#?}");
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
              (3/3 rounds agree), 0.95x avg, 0.95x p99 latency"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("least_conn:")),
        "{lines:#?}"
    );
}

/// lb-slow's systems are policies of sluice, HAProxy and nginx: their bars
/// take their proxy's colour, and the legend names each proxy once, so
/// that no two legend entries share a colour.
#[test]
fn policy_bars_take_their_proxys_colour() {
    let results = fixture();
    let bars = html::rss_bars(&results);
    for (system, bar) in bars.iter().filter(|(_, b)| b.label.starts_with("lb-slow")) {
        let proxy = system.split(' ').next().unwrap_or_default();
        assert_eq!(bar.bars[0].color, svg::system_color(proxy), "{system}");
    }
    let html = html(&results);
    let rss = &html[html.find("Peak RSS of the system under test").unwrap()..];
    let rss = &rss[..rss.find("</svg>").unwrap()];
    for legend in [
        "sluice round_robin",
        "haproxy least_conn",
        "nginx least_conn",
    ] {
        assert!(
            !rss.contains(&format!(">{legend}<")),
            "{legend} in the legend"
        );
    }
}

#[test]
fn html_is_well_formed_self_contained_and_has_charts() {
    let results = fixture();
    let html = html(&results);
    assert!(html.starts_with("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\""));
    let charts = check_html(&html).unwrap_or_else(|e| panic!("{e}"));
    // Throughput, latency, lb x2, io, open x2, RSS, and one per seed.
    assert_eq!(charts, 12);
    let doc = parse(&html).unwrap();
    let tables = doc
        .descendants()
        .filter(|n| n.has_tag_name("table"))
        .count();
    // Machine, settings, 2 summaries, 9 groups, 3 pivots; 4 runtimes
    // groups, each with its seed's table and its versions.
    assert_eq!(tables, 28);
    let text: String = doc
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect();
    assert!(text.contains("Times (backend petstore ÷ sluice -> petstore)"));
    // The note's markup characters came through as text.
    assert!(text.contains("12,000 & up to 12,000 connections <open-file limit>"));
    for title in [
        "Throughput per scenario",
        "Latency percentiles (log scale)",
        "Load balancing over 5 backends: throughput vs connections",
        "IO-heavy passthrough: p95 latency vs users",
        "Peak RSS of the system under test",
    ] {
        assert!(
            doc.descendants()
                .any(|n| n.has_tag_name("title") && n.text() == Some(title)),
            "no chart titled {title}"
        );
    }
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

/// The SVG drawing helpers.
mod svg_charts {
    use crate::report::svg::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(12_000.0, 6),
            [0.0, 2e3, 4e3, 6e3, 8e3, 10e3, 12e3]
        );
        assert_eq!(nice_ticks(0.9, 4), [0.0, 0.5, 1.0]);
        assert_eq!(nice_ticks(0.0, 4).last(), Some(&1.0));
        assert_eq!(log_ticks(0.3, 450.0), [0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(0.3, 7.0), [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
        assert_eq!(tick_label(12_000.0), "12k");
        assert_eq!(tick_label(1_500.0), "1.5k");
        assert_eq!(tick_label(0.2), "0.2");
        assert_eq!(tick_label(250.0), "250");
    }

    /// A seed chart's title takes two lines instead of running off both
    /// ends of the chart; a short one stays whole.
    #[test]
    fn long_titles_wrap_within_the_chart() {
        let title = "Each runtime's petstore, alone and behind a proxy (seeds/000 Q5): \
                     requests/s alone and behind each proxy (log scale)";
        let lines = title_lines(title);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines.join(" "), title);
        assert!(lines.iter().all(|l| l.chars().count() <= 92), "{lines:?}");
        assert_eq!(
            title_lines("Throughput per scenario"),
            ["Throughput per scenario"]
        );
    }

    #[test]
    fn text_is_escaped() {
        let chart = BarChart {
            title: "a < b & c".into(),
            x_label: "x".into(),
            rows: vec![BarRow {
                label: "<script>".into(),
                bars: vec![Bar {
                    value: 1.0,
                    color: "#000000".into(),
                    text: "1 & 2".into(),
                }],
            }],
            legend: vec![("\"q\"".into(), "#000000".into())],
            log: false,
        };
        let svg = bar_chart(&chart);
        assert!(svg.contains("a &lt; b &amp; c"));
        assert!(!svg.contains("<script>"));
        assert!(roxmltree::Document::parse(&svg).is_ok(), "{svg}");
    }
}
