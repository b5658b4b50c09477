//! `sluice load --html FILE`: a well-formed, self-contained page (no
//! script, nothing fetched) with its charts, which headless Chromium opens
//! as strict XHTML without an error, its console silent.
//!
//! Without Chromium (Debian package `chromium`) the browser part prints a
//! SKIP line; `SLUICE_REQUIRE_CHROMIUM=1` makes that a failure.

use testkit::Backend;

use crate::common::{load, scratch};

#[test]
fn the_html_report_is_self_contained_and_chromium_opens_it_without_errors() {
    let petstore = testkit::serve(Backend::Petstore);
    let dir = scratch("load-html");
    let plan = dir.join("plan.yaml");
    std::fs::write(
        &plan,
        format!(
            "thresholds: [\"p99 < 10s\"]\n\
             scenarios:\n\
             \x20 - name: ramp <&> \"quoted\"\n\
             \x20   model: open\n\
             \x20   url: {url}\n\
             \x20   requests: [GET /v1/pets, GET /nope]\n\
             \x20   connections: 4\n\
             \x20   stages: [{{ duration: 2s, target: 100 }}, {{ duration: 1s, target: 100 }}]\n\
             \x20   checks: [{{ status: 200 }}]\n\
             \x20 - name: users\n\
             \x20   model: users\n\
             \x20   url: {url}\n\
             \x20   think: 20ms\n\
             \x20   stages: [{{ duration: 3s, target: 3 }}]\n",
            url = petstore.url("/v1/pets")
        ),
    )
    .unwrap();
    let html = dir.join("report.html");
    let output = load(&[
        "-f",
        plan.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&page, options)
        .unwrap_or_else(|err| panic!("not well-formed: {err}\n{page}"));
    let mut charts = 0;
    for node in doc.descendants().filter(|n| n.is_element()) {
        let name = node.tag_name().name();
        assert!(
            !matches!(
                name,
                "script" | "link" | "img" | "iframe" | "object" | "embed"
            ),
            "<{name}> in a self-contained page"
        );
        for attr in node.attributes() {
            let v = attr.value();
            assert!(
                !v.contains("//") && !v.contains("url("),
                "<{name} {}=\"{v}\">",
                attr.name()
            );
        }
        if name == "svg" && node.attribute("class") == Some("chart") {
            charts += 1;
        }
    }
    // Per scenario: latency over time, rate over time, errors and checks;
    // the users' stages add the users asked for.
    assert_eq!(charts, 7, "{page}");
    for text in [
        "Scenario ramp &lt;&amp;&gt; &quot;quoted&quot;",
        "ramp &lt;&amp;&gt; &quot;quoted&quot;: latency percentiles over time",
        "target rate",
        "users asked for",
        "All scenarios together",
        "All 1 thresholds passed.",
    ] {
        assert!(page.contains(text), "no {text} in the page");
    }

    let test = "the_html_report_is_self_contained_and_chromium_opens_it_without_errors";
    let Some(chromium) = testkit::chromium::find(test) else {
        return;
    };
    // As XHTML, Chromium parses the page strictly: a mistake would show.
    let xhtml = dir.join("report.xhtml");
    std::fs::copy(&html, &xhtml).unwrap();
    let url = format!("file://{}", xhtml.display());
    let (profile, net_log) = (dir.join("profile"), dir.join("net.json"));
    let browsed = testkit::chromium::run(chromium, &profile, &net_log, ("--dump-dom", 2_000), &url);
    let (dom, log) = (&browsed.stdout, &browsed.stderr);
    assert!(
        !dom.contains("parsererror") && !dom.contains("This page contains the following errors"),
        "{dom}"
    );
    assert!(dom.contains("id=\"verdict\""), "{dom}");
    assert_eq!(dom.matches("class=\"chart\"").count(), 7, "{dom}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}
