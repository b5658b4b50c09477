//! The admin listener's dashboard (docs/DASHBOARD.md): the page loads
//! without a token but its data does not; `/stats.json` counts what
//! happened; and headless Chromium, pointed at a proxy under load, shows
//! numbers that move and fetches nothing outside the admin origin.
//!
//! Without Chromium (Debian package `chromium`) the browser test prints a
//! SKIP line; `SLUICE_REQUIRE_CHROMIUM=1` (set by .ci/run when it
//! installed it) makes that a failure. `SLUICE_DASHBOARD_SCREENSHOT=FILE`
//! also saves a screenshot of the page under load there.

use crate::support;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering::Relaxed},
        Arc,
    },
};

use support::{live::scratch, Echo, Proxy};
use testkit::RawConn;

const TOKEN: &str = "dashboard-token-0123456789abcdef";

async fn get(addr: SocketAddr, path: &str, extra: &[&str]) -> testkit::RawResponse {
    RawConn::connect(addr)
        .await
        .request("GET", path, extra, b"")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_needs_no_token_and_its_data_does() {
    let echo = Echo::start("e").await;
    let dir = scratch("dashboard-token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let proxy = Proxy::start_yaml(&format!(
        "workers: 2\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: 127.0.0.1:0, hosts: [test], token_file: {} }}\n\
         upstreams:\n  echo: {{ hosts: [\"http://{}\"] }}\n\
         middleware:\n  limit: {{ rate_limit: {{ rate: 1/m, burst: 1 }} }}\n\
         routes:\n  - {{ path: /limited, chain: [metrics, limit], upstream: echo }}\n  - {{ path: /, upstream: echo }}\n",
        token_file.display(),
        echo.addr
    ));
    let mut conn = proxy.conn().await;
    for path in ["/", "/", "/limited", "/limited"] {
        conn.get(path).await;
    }

    for path in ["/", "/ui", "/ui.js", "/ui.css"] {
        let answer = get(proxy.admin(), path, &[]).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        let csp = answer.header("content-security-policy").unwrap();
        assert!(csp.starts_with("default-src 'none';"), "{csp}");
        assert_eq!(answer.header("cache-control"), Some("no-store"));
    }
    let page = get(proxy.admin(), "/", &[]).await.text();
    assert!(page.contains("<script src=\"ui.js\"></script>"), "{page}");
    // A Host that is not this listener is refused, page included.
    let mut conn = RawConn::connect(proxy.admin()).await;
    conn.send("GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        .await;
    let rebound = conn.read_response(false).await;
    assert_eq!(rebound.status, 421, "{}", rebound.text());

    assert_eq!(get(proxy.admin(), "/stats.json", &[]).await.status, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let stats = get(proxy.admin(), "/stats.json", &[&bearer]).await;
    assert_eq!(stats.status, 200, "{}", stats.text());
    let stats = stats.json();
    assert_eq!(stats["requests"]["total"], 4, "{stats}");
    assert_eq!(stats["requests"]["too_many_requests"], 1, "{stats}");
    assert_eq!(stats["requests"]["by_class"]["2xx"], 3, "{stats}");
    assert_eq!(stats["generation"], 0, "{stats}");
    assert!(stats["reload"]["last_error"].is_null(), "{stats}");
    let limited = stats["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["route"] == "/limited")
        .unwrap();
    assert_eq!(limited["latency"]["count"], 2, "{stats}");
    let bounds = stats["latency_bounds"].as_array().unwrap().len();
    assert_eq!(
        limited["latency"]["buckets"].as_array().unwrap().len(),
        bounds + 1
    );
    let untimed = stats["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["route"] == "/");
    assert!(untimed.unwrap()["latency"].is_null(), "{stats}");
    let host = &stats["upstreams"]["echo"]["hosts"][0];
    assert_eq!(host["state"], "healthy", "{stats}");
    assert_eq!(host["requests"], 3, "{stats}");
    assert!(stats["upstreams"]["echo"]["latency"]["count"].as_u64() == Some(3));
    assert!(stats["at_ms"].as_u64().unwrap() > 1_600_000_000_000);

    // In a browser, the page asks for the token instead of showing data.
    let test = "the_page_needs_no_token_and_its_data_does (browser)";
    if let Some(binary) = chromium(test) {
        let url = format!("http://{}/ui", proxy.admin());
        let dom = tokio::task::spawn_blocking(move || {
            let net_log = dir.join("net.json");
            run_chromium(
                binary,
                &dir.join("profile"),
                &net_log,
                ("--dump-dom", 3_000),
                &url,
            )
        })
        .await
        .unwrap();
        assert_eq!(shown(&dom, "status"), "token needed", "{dom}");
        assert!(dom.contains("<form id=\"auth\">"), "{dom}");
        assert_eq!(shown(&dom, "total"), "-", "{dom}");
    }
}

/// The Chromium binary, or `None` with a SKIP line (a panic when required).
fn chromium(test: &str) -> Option<&'static str> {
    testkit::chromium::find(test)
}

/// Runs headless Chromium on `url` (see [`testkit::chromium::run`]);
/// what it printed on stdout.
fn run_chromium(
    binary: &str,
    profile: &Path,
    net_log: &Path,
    action: (&str, u32),
    url: &str,
) -> String {
    testkit::chromium::run(binary, profile, net_log, action, url).stdout
}

/// The text of the element with `id` in a dumped DOM.
fn shown(dom: &str, id: &str) -> String {
    let marker = format!("id=\"{id}\"");
    let at = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id} in\n{dom}"));
    let rest = &dom[at..];
    let rest = &rest[rest.find('>').unwrap() + 1..];
    rest[..rest.find('<').unwrap()].to_string()
}

/// The URLs requested on behalf of the page: the network log's requests
/// whose network isolation key is the page's site (`http://127.0.0.1`).
/// The browser's own traffic (update and time checks, which flags turn
/// off where they can) is keyed otherwise.
fn page_urls(net_log: &Path) -> Vec<String> {
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(net_log).unwrap()).unwrap();
    let mut by_source: std::collections::BTreeMap<u64, (Vec<String>, bool)> = Default::default();
    for event in log["events"].as_array().unwrap() {
        let source = event["source"]["id"].as_u64().unwrap_or(0);
        let entry = by_source.entry(source).or_default();
        let params = &event["params"];
        if let Some(url) = params["url"].as_str() {
            entry.0.push(url.to_string());
        }
        if params["network_isolation_key"] == "http://127.0.0.1 http://127.0.0.1" {
            entry.1 = true;
        }
    }
    by_source
        .into_values()
        .filter(|(_, page)| *page)
        .flat_map(|(urls, _)| urls)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_shows_numbers_that_move_and_fetches_only_from_the_admin_origin() {
    let test = "chromium_shows_numbers_that_move_and_fetches_only_from_the_admin_origin";
    let Some(binary) = chromium(test) else {
        return;
    };
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    let proxy = Proxy::start_with(
        "workers: 2",
        &format!(
            "upstreams:\n  two:\n    hosts: [\"http://{}\", \"http://{}\"]\n\
             middleware:\n  limit: {{ rate_limit: {{ rate: 1/m, burst: 1, key: \"header:x-key\" }} }}\n\
             routes:\n  - {{ path: /limited, chain: [metrics, limit], upstream: two }}\n  - {{ path: /, chain: [metrics], upstream: two }}\n",
            a.addr, b.addr
        ),
    );
    // Load until the browser is done: one keep-alive connection, each
    // request after the last answer (loopback, bounded by the round trip).
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn({
        let (stop, addr) = (Arc::clone(&stop), proxy.addr());
        async move {
            let mut conn = RawConn::connect(addr).await;
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                let path = if n.is_multiple_of(10) {
                    "/limited"
                } else {
                    "/"
                };
                let key = format!("X-Key: k{}", n % 20);
                conn.request("GET", path, &[&key], b"").await;
                n += 1;
            }
            n
        }
    });
    let dir = scratch("dashboard-chromium");
    let url = format!("http://{}/", proxy.admin());
    let origin = format!("http://{}/", proxy.admin());
    let screenshot = std::env::var_os("SLUICE_DASHBOARD_SCREENSHOT").map(PathBuf::from);
    let browse = tokio::task::spawn_blocking(move || {
        let mut doms = Vec::new();
        // 5 polls, then 200: more than the 120 the page keeps.
        for (round, budget) in [5_000, 200_000].into_iter().enumerate() {
            let net_log = dir.join(format!("net-{round}.json"));
            let action = ("--dump-dom", budget);
            let dom = run_chromium(binary, &dir.join("profile"), &net_log, action, &url);
            doms.push((dom, page_urls(&net_log)));
        }
        if let Some(file) = screenshot {
            let action = format!("--screenshot={}", file.display());
            let net_log = dir.join("net-shot.json");
            run_chromium(
                binary,
                &dir.join("profile"),
                &net_log,
                (&action, 30_000),
                &url,
            );
        }
        doms
    });
    let doms = browse.await.unwrap();
    stop.store(true, Relaxed);
    let sent = load.await.unwrap();

    let totals: Vec<u64> = doms
        .iter()
        .map(|(dom, _)| shown(dom, "total").parse().unwrap())
        .collect();
    assert!(
        totals[0] > 0 && totals[1] > totals[0],
        "{totals:?} (sent {sent})"
    );
    let (last, _) = &doms[1];
    // Rows are replaced at each poll, never appended: the same tables
    // have the same rows however long the page ran.
    let rows = |dom: &str| dom.matches("<tr>").count();
    assert_eq!(rows(&doms[0].0), rows(last), "{last}");
    // The history is bounded: past 120 polls the page keeps 120. (The
    // second page made about 200 polls in its virtual time: at least
    // 121 or this says nothing.)
    let polled: u32 = shown(last, "polled").parse().unwrap();
    assert!(polled > 120, "{polled} polls in 200 s of virtual time");
    assert_eq!(shown(last, "kept"), "120", "{last}");
    let first_polled: u32 = shown(&doms[0].0, "polled").parse().unwrap();
    assert_eq!(shown(&doms[0].0, "kept"), first_polled.to_string());
    let rps: f64 = shown(last, "rps")
        .parse()
        .unwrap_or_else(|_| panic!("{last}"));
    assert!(rps >= 0.0, "{rps}");
    assert_eq!(shown(last, "status"), "live", "{last}");
    assert_eq!(shown(last, "generation"), "0", "{last}");
    assert!(last.contains("<td>/limited</td>"), "{last}");
    assert!(last.matches("<td>two</td>").count() >= 3, "{last}");
    for (_, urls) in &doms {
        assert!(urls.iter().any(|u| u.ends_with("/stats.json")), "{urls:?}");
        for url in urls {
            assert!(url.starts_with(&origin), "{url} is outside {origin}");
        }
    }
}
