//! The admin listener's guards (issue 26), over real sockets: `/config`
//! shows no header value, environment value or token; state changes
//! need the bearer token beyond loopback (401, constant-time compare,
//! rotation by reload); requests naming a host that is not this listener
//! are refused (DNS rebinding).

use crate::support;

use std::{net::SocketAddr, path::Path};

use support::{
    live::{scratch, start},
    Echo,
};
use testkit::{RawConn, RawResponse};

const TOKEN: &str = "admin-token-0123456789abcdef";

/// `METHOD path` to the admin listener with `Host: host` and `extra` lines.
async fn admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    extra: &[&str],
) -> RawResponse {
    let mut conn = RawConn::connect(addr).await;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for line in extra {
        head.push_str(line);
        head.push_str("\r\n");
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    conn.send(head).await;
    conn.read_response(method == "HEAD").await
}

/// The admin listener bound to 0.0.0.0 is reached on 127.0.0.1.
fn on_loopback(admin: SocketAddr) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], admin.port()))
}

fn assert_problem(answer: &RawResponse, status: u16) {
    assert_eq!(answer.status, status, "{}", answer.text());
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(answer.json()["status"], status);
}

#[tokio::test]
async fn config_shows_that_secrets_are_set_but_not_their_values() {
    let echo = Echo::start("echo").await;
    let yaml = format!(
        "workers: 1
listeners: [{{ address: 127.0.0.1:0 }}]
admin: {{ address: 127.0.0.1:0 }}
upstreams:
  echo:
    hosts: [\"http://{}\"]
    host_header: \"${{BACKEND_NAME}}\"
    sticky: {{ cookie: srv, key: \"${{STICKY_KEY}}\" }}
middleware:
  auth:
    headers:
      request:
        set:
          authorization: \"Bearer ${{UPSTREAM_TOKEN}}\"
          x-api-key: \"${{API_KEY}}\"
          x-static: literal-static-value
routes: [{{ path: /, chain: [auth], upstream: echo }}]
",
        echo.addr
    );
    let env = |name: &str| {
        Some(match name {
            "BACKEND_NAME" => "backend.S3CR3T.example".to_string(),
            "STICKY_KEY" => "sticky-S3CR3T-9999".to_string(),
            "UPSTREAM_TOKEN" => "upstream-bearer-S3CR3T-1234".to_string(),
            "API_KEY" => "api-key-S3CR3T-5678".to_string(),
            _ => return None,
        })
    };
    let config = proxy::config::parse(&yaml, Path::new("secrets.yaml"), env).unwrap();
    let running = proxy::start(&config).unwrap();
    let admin_addr = running.admin.unwrap();

    // The upstream still gets the real values.
    let mut client = RawConn::connect(running.listeners[0]).await;
    let seen = client.get("/").await.text();
    assert!(
        seen.contains("authorization: Bearer upstream-bearer-S3CR3T-1234"),
        "{seen}"
    );

    let answer = admin(admin_addr, "GET", "/config", "127.0.0.1", &[]).await;
    assert_eq!(answer.status, 200);
    let body = answer.text();
    for secret in [
        "S3CR3T",
        "literal-static-value",
        "upstream-bearer",
        "api-key-S3CR3T",
    ] {
        assert!(!body.contains(secret), "`{secret}` in /config:\n{body}");
    }
    let config = answer.json();
    let set = &config["middleware"]["auth"]["headers"]["request"]["set"];
    // That they are set, and a hash that tells two configurations apart:
    // the first 8 hex digits of SHA-256, the same in every process.
    assert_eq!(set["authorization"], "(redacted sha256:40894267)");
    assert_eq!(set["x-api-key"], "(redacted sha256:59105bd6)");
    assert_eq!(set["x-static"], "(redacted sha256:c84eab0d)");
    let upstream = &config["upstreams"]["echo"];
    assert!(upstream["host_header"]
        .as_str()
        .unwrap()
        .starts_with("(redacted sha256:"));
    assert!(upstream["sticky"]["key"]
        .as_str()
        .unwrap()
        .starts_with("(redacted sha256:"));
    assert_eq!(upstream["sticky"]["cookie"], "srv");
    assert_eq!(config["routes"][0]["path"], "/", "the rest is shown");
    drop(client);
    running.shutdown();
}

#[tokio::test]
async fn state_changes_need_the_token_beyond_loopback_and_a_reload_rotates_it() {
    let echo = Echo::start("echo").await;
    let dir = scratch("admin-token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let file = dir.join("sluice.yaml");
    let config = |route: &str| {
        format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: 0.0.0.0:0, token_file: {} }}\n{}",
            token_file.display(),
            support::one_upstream(echo.addr, "").replace("path: /,", &format!("path: {route},"))
        )
    };
    std::fs::write(&file, config("/")).unwrap();
    let proxy = start(&file);
    let addr = on_loopback(proxy.admin.unwrap());
    let right = format!("Authorization: Bearer {TOKEN}");

    let missing = admin(addr, "POST", "/reload", "127.0.0.1", &[]).await;
    assert_problem(&missing, 401);
    assert_eq!(
        missing.header("www-authenticate"),
        Some(r#"Bearer realm="sluice-admin""#)
    );
    let wrong = admin(
        addr,
        "POST",
        "/reload",
        "127.0.0.1",
        &["Authorization: Bearer admin-token-0123456789abcdeX"],
    )
    .await;
    assert_problem(&wrong, 401);
    assert!(wrong
        .header("www-authenticate")
        .unwrap()
        .contains("invalid_token"));
    let basic = admin(
        addr,
        "POST",
        "/reload",
        "127.0.0.1",
        &["Authorization: Basic YWRtaW46YWRtaW4="],
    )
    .await;
    assert_problem(&basic, 401);
    assert!(!wrong.text().contains(TOKEN) && !missing.text().contains(TOKEN));

    // Probes and scrapers need no token; /config and /upstreams do.
    for path in ["/health", "/ready", "/metrics"] {
        assert_eq!(
            admin(addr, "GET", path, "127.0.0.1", &[]).await.status,
            200,
            "{path}"
        );
    }
    for path in ["/config", "/upstreams"] {
        assert_problem(&admin(addr, "GET", path, "127.0.0.1", &[]).await, 401);
        assert_eq!(
            admin(addr, "GET", path, "127.0.0.1", &[&right])
                .await
                .status,
            200,
            "{path}"
        );
    }
    let shown = admin(addr, "GET", "/config", "127.0.0.1", &[&right]).await;
    assert!(!shown.text().contains(TOKEN), "{}", shown.text());
    assert!(shown.json()["admin"]["token"]
        .as_str()
        .unwrap()
        .starts_with("(redacted sha256:"));

    // The right token reloads: the route moved.
    std::fs::write(&file, config("/moved")).unwrap();
    let reloaded = admin(addr, "POST", "/reload", "127.0.0.1", &[&right]).await;
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    assert_eq!(reloaded.json()["generation"], 1);
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert_eq!(client.get("/").await.status, 404);
    assert_eq!(client.get("/moved").await.status, 200);

    // A new token in the file takes over at the next reload.
    let next = "next-admin-token-fedcba9876543210";
    std::fs::write(&token_file, next).unwrap();
    assert_eq!(
        admin(addr, "POST", "/reload", "127.0.0.1", &[&right])
            .await
            .status,
        200
    );
    assert_problem(
        &admin(addr, "POST", "/reload", "127.0.0.1", &[&right]).await,
        401,
    );
    let next_header = format!("Authorization: Bearer {next}");
    assert_eq!(
        admin(addr, "POST", "/reload", "127.0.0.1", &[&next_header])
            .await
            .status,
        200
    );

    // A bad token file fails the reload where it is written; the token in use stays.
    std::fs::write(&token_file, "\n").unwrap();
    let failed = admin(addr, "POST", "/reload", "127.0.0.1", &[&next_header]).await;
    assert_problem(&failed, 422);
    let message = failed.json()["detail"].as_str().unwrap().to_string();
    assert!(
        message.contains("sluice.yaml:3:")
            && message.contains("admin.token_file")
            && message.contains("is empty"),
        "{message}"
    );
    assert_eq!(
        admin(addr, "GET", "/config", "127.0.0.1", &[&next_header])
            .await
            .status,
        200
    );
    assert_eq!(client.get("/moved").await.status, 200);
    drop(client);
    proxy.shutdown();
}

#[tokio::test]
async fn without_a_token_loopback_stays_open_and_beyond_it_reload_is_refused() {
    let echo = Echo::start("echo").await;
    let dir = scratch("admin-open");
    for (address, reload_status) in [("127.0.0.1:0", 200), ("0.0.0.0:0", 403)] {
        let file = dir.join(format!("{reload_status}.yaml"));
        std::fs::write(
            &file,
            format!(
                "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: {address} }}\n{}",
                support::one_upstream(echo.addr, "")
            ),
        )
        .unwrap();
        let proxy = start(&file);
        let addr = on_loopback(proxy.admin.unwrap());
        let answer = admin(addr, "POST", "/reload", "127.0.0.1", &[]).await;
        assert_eq!(answer.status, reload_status, "{address}: {}", answer.text());
        if reload_status == 403 {
            assert_problem(&answer, 403);
            assert!(answer.text().contains("admin.token"), "{}", answer.text());
        }
        // Reads stay open without a token (and the start warned).
        assert_eq!(
            admin(addr, "GET", "/config", "127.0.0.1", &[]).await.status,
            200
        );
        proxy.shutdown();
    }
}

#[tokio::test]
async fn requests_naming_another_host_are_refused() {
    let echo = Echo::start("echo").await;
    let proxy = support::Proxy::start_yaml(&format!(
        "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: 127.0.0.1:0, hosts: [sluice-admin.internal] }}\n{}",
        support::one_upstream(echo.addr, "")
    ));
    let addr = proxy.admin();
    let port = addr.port();
    for host in [
        "evil.example",
        &format!("evil.example:{port}"),
        "127.0.0.1.nip.io",
        "test",
    ] {
        for path in ["/health", "/config"] {
            let answer = admin(addr, "GET", path, host, &[]).await;
            assert_problem(&answer, 421);
        }
        assert_problem(&admin(addr, "POST", "/reload", host, &[]).await, 421);
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_string(),
        format!("[::1]:{port}"),
        format!("sluice-admin.internal:{port}"),
    ] {
        assert_eq!(
            admin(addr, "GET", "/config", &host, &[]).await.status,
            200,
            "{host}"
        );
    }
    // An absolute-form target names the host too.
    let answer = admin(addr, "GET", "http://evil.example/config", "127.0.0.1", &[]).await;
    assert_problem(&answer, 421);
    // HTTP/1.0 without Host: not a browser; answered.
    let mut conn = RawConn::connect(addr).await;
    conn.send("GET /health HTTP/1.0\r\n\r\n").await;
    assert_eq!(conn.read_response(false).await.status, 200);
}
