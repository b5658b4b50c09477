//! The `metrics` and `access_log` handlers: what each request leaves
//! behind, and a full access log queue that drops lines instead of
//! stalling requests.

use std::time::Duration;

use super::{counter, proxy_with};
use crate::support::{self, Echo};
use testkit::RawConn;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_access_log_record_each_request() {
    let echo = Echo::start("e").await;
    let log = std::env::temp_dir().join(format!("sluice-access-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let middleware = format!(
        "middleware:\n  access_log: {{ path: \"{}\", headers: [user-agent, authorization, x-api-key], mask: [x-api-key] }}\n  deny: {{ ip_filter: {{ deny: [127.0.0.1] }} }}\n",
        log.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /v1, chain: [correlation, metrics, access_log], upstream: echo }\n  - { path: /denied, chain: [metrics, access_log, deny], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    for _ in 0..3 {
        let response = conn
            .request(
                "GET",
                "/v1/pets?token=s3cret",
                &[
                    "User-Agent: t/1",
                    "Authorization: Bearer abc.def.ghi",
                    "X-Api-Key: k3y",
                ],
                b"",
            )
            .await;
        assert_eq!(response.status, 200);
    }
    assert_eq!(
        conn.request("POST", "/denied", &[], b"{}").await.status,
        403
    );

    let metrics = RawConn::connect(proxy.admin())
        .await
        .get("/metrics")
        .await
        .text();
    assert!(
        metrics.contains("sluice_http_request_duration_seconds_count{route=\"/v1\",method=\"GET\",status=\"2xx\",upstream=\"echo\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_http_request_duration_seconds_count{route=\"/denied\",method=\"POST\",status=\"4xx\",upstream=\"\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_access_log_dropped_total 0"));

    // The writer thread flushes when its queue runs dry.
    let lines = support::access_log_lines(&log, 4).await;
    let text = format!("{lines:?}");
    assert_eq!(lines.len(), 4, "{text}");
    let first = &lines[0];
    assert_eq!(first["status"], 200);
    assert_eq!(first["method"], "GET");
    assert_eq!(first["path"], "/v1/pets");
    assert_eq!(first["route"], "/v1");
    assert_eq!(first["upstream"], "echo");
    assert_eq!(first["client"], "127.0.0.1");
    assert_eq!(first["headers"]["user-agent"], "t/1");
    assert_eq!(first["headers"]["authorization"], "***");
    assert_eq!(first["headers"]["x-api-key"], "***");
    assert_eq!(first["correlation_id"].as_str().unwrap().len(), 36);
    assert!(first["duration_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        !text.contains("s3cret") && !text.contains("abc.def") && !text.contains("k3y"),
        "{text}"
    );
    assert_eq!(lines[3]["status"], 403);
    assert_eq!(lines[3]["upstream"], "");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_access_log_queue_drops_and_counts_lines_without_stalling() {
    let echo = Echo::start("e").await;
    let log = std::env::temp_dir().join(format!("sluice-access-drop-{}.log", std::process::id()));
    let proxy = proxy_with(
        echo.addr,
        &format!(
            "middleware:\n  access_log: {{ path: \"{}\", queue: 1 }}\n",
            log.display()
        ),
        "  - { path: /, chain: [access_log], upstream: echo }\n",
    );
    // 200 pipelined requests arrive far faster than the writer's 20 ms batches.
    let mut conn = proxy.conn().await;
    conn.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200))
        .await;
    for _ in 0..200 {
        assert_eq!(conn.read_response(false).await.status, 200);
    }
    let dropped = || counter(proxy.admin(), "sluice_access_log_dropped_total");
    let written = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count() as u64
    };
    // Every request's line is either written or counted as dropped: once the
    // writer has drained its queue the two add up to the 200 exactly.
    support::live::until(Duration::from_secs(10), || async {
        written() + dropped().await >= 200
    })
    .await;
    let dropped = dropped().await;
    assert_eq!(written() + dropped, 200, "{dropped} dropped");
    // A queue of one cannot hold 200 lines that come faster than its
    // batches: some were dropped (a queue that blocked instead drops none).
    assert!(dropped > 0, "nothing dropped");
    let _ = std::fs::remove_file(&log);
}
