//! Handlers that decide who gets through: `ip_filter` (and when
//! X-Forwarded-For is trusted) and `jwt` (bad tokens, key rotation, keys
//! from a JWKS URL).

use std::sync::atomic::Ordering;

use super::{claims, proxy_with, upstream_saw, write_jwks};
use crate::support::{Echo, Proxy};
use testkit::RawConn;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_filter_honours_trusted_forwarding_only_when_told() {
    let echo = Echo::start("e").await;
    let middleware =
        "middleware:\n  inside: { ip_filter: { allow: [10.0.0.0/8], deny: [10.9.0.0/16] } }\n";
    let routes = "  - { path: /, chain: [inside], upstream: echo }\n";
    let proxy = proxy_with(echo.addr, middleware, routes);
    let mut conn = proxy.conn().await;
    let refused = conn.get("/").await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["status"], 403);
    // Without trust, a forged X-Forwarded-For changes nothing.
    let forged = conn
        .request("GET", "/", &["X-Forwarded-For: 10.1.1.1"], b"")
        .await;
    assert_eq!(forged.status, 403);
    drop(proxy);

    let trusted = Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nforwarded: {{ trust: true }}\n{middleware}routes:\n{routes}",
        echo.addr
    ));
    let mut conn = trusted.conn().await;
    let ok = conn
        .request("GET", "/", &["X-Forwarded-For: 192.168.0.1, 10.1.1.1"], b"")
        .await;
    assert_eq!(ok.status, 200);
    let denied = conn
        .request("GET", "/", &["X-Forwarded-For: 10.9.1.1"], b"")
        .await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        conn.get("/").await.status,
        403,
        "the peer 127.0.0.1 is not allowed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_admits_good_tokens_refuses_bad_ones_and_follows_key_rotation() {
    let echo = Echo::start("e").await;
    let first = jwt::generate_key(jwt::Algorithm::ES256, "k1").unwrap();
    let jwks = std::env::temp_dir().join(format!("sluice-jwks-{}.json", std::process::id()));
    write_jwks(&jwks, &[&first]);
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks: \"{}\", algorithms: [ES256, RS256], issuer: \"https://issuer.example\", audience: [petstore], scopes: [\"pets:read\"], forward_claims: {{ sub: x-user }} }}\n",
        jwks.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let bearer = |token: &str| format!("Authorization: Bearer {token}");

    let missing = conn.get("/").await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"sluice\"")
    );

    let good = first.sign(&claims("pets:read pets:write", 600)).unwrap();
    let response = conn
        .request("GET", "/", &[&bearer(&good), "X-User: admin"], b"")
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(upstream_saw(&response.text(), "x-user").unwrap(), "alice");
    assert!(
        !response.text().contains("admin"),
        "a forged claim header is dropped"
    );

    let no_scope = first.sign(&claims("pets:write", 600)).unwrap();
    let forbidden = conn.request("GET", "/", &[&bearer(&no_scope)], b"").await;
    assert_eq!(forbidden.status, 403);
    assert!(forbidden
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"insufficient_scope\""));

    let expired = first.sign(&claims("pets:read", -3600)).unwrap();
    let mut wrong_issuer = claims("pets:read", 600);
    wrong_issuer["iss"] = "https://evil.example".into();
    let wrong_issuer = first.sign(&wrong_issuer).unwrap();
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims("pets:read", 600).to_string().as_bytes())
    );
    let (head, rest) = good.split_once('.').unwrap();
    let tampered = format!(
        "{head}.{}",
        rest.replacen(|c: char| c.is_ascii_alphanumeric(), "A", 1)
    );
    let oversize = format!("{good}{}", "A".repeat(9000));
    for (what, token) in [
        ("expired", expired.as_str()),
        ("wrong issuer", wrong_issuer.as_str()),
        ("alg none", none.as_str()),
        ("tampered", tampered.as_str()),
        ("bad base64", "a$b.c$d.e$f"),
        ("oversize", oversize.as_str()),
    ] {
        let refused = conn.request("GET", "/", &[&bearer(token)], b"").await;
        assert_eq!(refused.status, 401, "{what}");
        let challenge = refused.header("www-authenticate").unwrap();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(
            !challenge.contains(token),
            "{what}: the token is never echoed"
        );
    }
    let basic = conn
        .request("GET", "/", &["Authorization: Basic YTpi"], b"")
        .await;
    assert_eq!(basic.status, 401);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        1,
        "only the good token got through"
    );

    // Rotation: a token signed by a key added to the JWKS file is admitted
    // after one refetch, without a restart.
    let second = jwt::generate_key(jwt::Algorithm::ES256, "k2").unwrap();
    write_jwks(&jwks, &[&first, &second]);
    let rotated = second.sign(&claims("pets:read", 600)).unwrap();
    assert_eq!(
        conn.request("GET", "/", &[&bearer(&rotated)], b"")
            .await
            .status,
        200
    );
    // Another unknown kid right after finds the refetch rate-limited (one
    // per 10 s): its key is in the file already, yet it is not read again.
    let third = jwt::generate_key(jwt::Algorithm::ES256, "k3").unwrap();
    write_jwks(&jwks, &[&first, &second, &third]);
    let unknown = third.sign(&claims("pets:read", 600)).unwrap();
    assert_eq!(
        conn.request("GET", "/", &[&bearer(&unknown)], b"")
            .await
            .status,
        401
    );
    let _ = std::fs::remove_file(&jwks);
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_keys_come_from_a_jwks_url() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = Echo::start("e").await;
    let key = jwt::generate_key(jwt::Algorithm::EdDSA, "url-key").unwrap();
    let body = key.jwks_json();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            // Chunked, to take the longer way through the fetcher.
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks_url: \"http://{jwks_addr}/.well-known/jwks.json?secret=x\", algorithms: [EdDSA] }}\n"
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt], upstream: echo }\n",
    );
    let token = key.sign(&claims("any", 600)).unwrap();
    let mut conn = proxy.conn().await;
    let response = conn
        .request(
            "GET",
            "/",
            &[&format!("Authorization: Bearer {token}")],
            b"",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    // The URL's query may carry credentials: /config does not show it.
    let config = RawConn::connect(proxy.admin())
        .await
        .get("/config")
        .await
        .text();
    assert!(
        config.contains("jwks.json") && !config.contains("secret=x"),
        "{config}"
    );
}
