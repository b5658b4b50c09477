//! `ext_authz` over gRPC against an Envoy `Authorization/Check` server
//! built from the published proto (bench/authz: go-control-plane's
//! generated code and grpc-go): allow with headers upstream and to the
//! client, `headers_to_remove`, denials with their status, headers and
//! body, gRPC errors, timeouts and both failure modes; each client protocol.

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
};

use super::{each_protocol, setup};

/// The Go server, killed on drop.
struct GrpcAuthz {
    child: Child,
    addr: SocketAddr,
}

impl Drop for GrpcAuthz {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GrpcAuthz {
    /// `None` (after a skip line) when the server is not built.
    fn start(test: &str) -> Option<Self> {
        let binary = std::env::var_os("SLUICE_AUTHZ_GRPC")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                Some(
                    std::path::PathBuf::from(std::env::var_os("HOME")?)
                        .join(".cache/sluice/authz/authz-grpc"),
                )
            })
            .filter(|path| path.is_file());
        let Some(binary) = binary else {
            testkit::skip(
                test,
                testkit::Need::Authz,
                "no ext_authz gRPC server (bash bench/authz/build.sh; needs Go)",
            );
            return None;
        };
        let mut child = Command::new(binary)
            .args(["-listen", "127.0.0.1:0", "-slow", "2s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .unwrap()
            .parse()
            .unwrap();
        Some(Self { child, addr })
    }
}

fn authz(addr: SocketAddr, extra: &str) -> String {
    format!("ext_authz: {{ grpc: \"http://{addr}\", upstream_headers: [x-auth-user, x-authz-saw]{extra} }}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_check_allows_with_headers_and_denies_with_the_services_answer() {
    let Some(server) =
        GrpcAuthz::start("grpc_check_allows_with_headers_and_denies_with_the_services_answer")
    else {
        return;
    };
    let middleware = format!(
        "middleware:\n  check: {{ {} }}\n",
        authz(server.addr, ", body: 1KiB")
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [check], upstream: echo }\n",
    )
    .await;
    let addr = proxy.addr();

    let headers = [
        ("x-user", "bob"),
        ("authorization", "Bearer opaque"),
        ("x-auth-user", "forged"),
    ];
    for reply in each_protocol(addr, &certs, "POST", "/allowed?x=1", &headers, b"hello").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-auth-user").as_deref(),
            Some("bob"),
            "{}",
            reply.protocol
        );
        assert_eq!(
            reply.upstream_saw("x-authz-saw").as_deref(),
            Some("POST /allowed?x=1 host=localhost body=5"),
            "{}",
            reply.protocol
        );
        assert_eq!(
            reply.upstream_saw("authorization"),
            None,
            "headers_to_remove over {}",
            reply.protocol
        );
        assert_eq!(reply.header("x-auth-response"), Some("grpc"), "{reply:?}");
    }
    for (status, expected) in [(None, 403), (Some("401"), 401)] {
        let headers: Vec<(&str, &str)> = status.map(|s| ("x-test-status", s)).into_iter().collect();
        for reply in each_protocol(addr, &certs, "GET", "/deny/it", &headers, b"").await {
            assert_eq!(reply.status, expected, "{reply:?}");
            assert_eq!(
                reply.body, "denied by grpc for /deny/it",
                "{}",
                reply.protocol
            );
            assert_eq!(reply.header("x-deny-reason"), Some("grpc says no"));
            assert_eq!(
                reply.header("www-authenticate"),
                Some("Basic realm=\"grpc\"")
            );
            assert_eq!(reply.header("content-type"), Some("text/plain"));
        }
    }
}

/// A client's own copy of a header the service is trusted to set never
/// reaches the upstream (`/bare` is allowed with the headers the server
/// always sets, so the forged value must be replaced, never kept beside).
async fn forged_header_is_replaced(test: &str, header: &str) {
    let Some(server) = GrpcAuthz::start(test) else {
        return;
    };
    let middleware = format!("middleware:\n  check: {{ {} }}\n", authz(server.addr, ""));
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [check], upstream: echo }\n",
    )
    .await;
    for reply in each_protocol(
        proxy.addr(),
        &certs,
        "GET",
        "/bare",
        &[(header, "forged-by-client")],
        b"",
    )
    .await
    {
        assert_eq!(reply.status, 200, "{reply:?}");
        let lines: Vec<_> = reply
            .body
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with(&format!("{header}:")))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{header} over {}: {lines:?}",
            reply.protocol
        );
        assert!(!lines[0].contains("forged-by-client"), "{lines:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_check_removes_a_forged_x_auth_user() {
    forged_header_is_replaced("grpc_check_removes_a_forged_x_auth_user", "x-auth-user").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_check_removes_a_forged_x_authz_saw() {
    forged_header_is_replaced("grpc_check_removes_a_forged_x_authz_saw", "x-authz-saw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_check_errors_and_timeouts_fail_open_or_closed() {
    let Some(server) = GrpcAuthz::start("grpc_check_errors_and_timeouts_fail_open_or_closed")
    else {
        return;
    };
    let middleware = format!(
        "middleware:\n  closed: {{ {} }}\n  open: {{ {} }}\n",
        authz(server.addr, ", timeout: 300ms"),
        authz(server.addr, ", timeout: 300ms, on_failure: fail_open"),
    );
    let routes = "  - { path: /slow/closed, chain: [closed], upstream: echo }\n  - { path: /error/closed, chain: [closed], upstream: echo }\n  - { path: /, chain: [open], upstream: echo }\n";
    let (_echo, certs, proxy) = setup(&middleware, routes).await;
    let forged = [("x-auth-user", "forged")];
    for (path, status, detail) in [
        ("/slow/closed", 504, "did not decide in time"),
        ("/error/closed", 502, "answered a gRPC error"),
    ] {
        for reply in each_protocol(proxy.addr(), &certs, "GET", path, &forged, b"").await {
            assert_eq!(reply.status, status, "{reply:?}");
            assert!(reply.body.contains(detail), "{reply:?}");
            assert!(!reply.body.contains(&server.addr.to_string()), "{reply:?}");
        }
    }
    for path in ["/slow/open", "/error/open"] {
        for reply in each_protocol(proxy.addr(), &certs, "GET", path, &forged, b"").await {
            assert_eq!(reply.status, 200, "{reply:?}");
            assert_eq!(
                reply.upstream_saw("x-auth-user"),
                None,
                "fail_open kept a forged header"
            );
        }
    }
}
