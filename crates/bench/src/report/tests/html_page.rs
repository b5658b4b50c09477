//! report.html: well-formed, self-contained XHTML whose charts name each
//! system once and colour it as its proxy.

use crate::report::{fixture, html, svg};

/// Parses report.html as XML and checks that it is self-contained;
/// returns the number of `<svg class="chart">` elements.
pub(super) fn check_html(html: &str) -> Result<usize, String> {
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
pub(super) fn parse(xml: &str) -> Result<roxmltree::Document<'_>, roxmltree::Error> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(xml, options)
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
