//! `api_key`: keys in a header or the query, inline and from a file
//! (re-read when it changes), the key's name upstream and never the key,
//! over each client protocol.

use super::{config_doc, each_protocol, setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_in_headers_and_query_admit_by_name_over_every_protocol() {
    let dir = std::env::temp_dir().join(format!("sluice-api-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("keys");
    std::fs::write(&file, "# deploy keys\nci: file-key-0123456789\n").unwrap();
    let middleware = format!(
        "middleware:\n  api_key: {{ keys: {{ ops: inline-key-abcdef }}, keys_file: \"{}\", query: api_key, reload: 100ms }}\n",
        file.display()
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [api_key], upstream: echo }\n",
    )
    .await;
    let addr = proxy.addr();

    for reply in each_protocol(addr, &certs, "GET", "/", &[], b"").await {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert_eq!(
            reply.header("www-authenticate"),
            Some("ApiKey realm=\"sluice\"")
        );
        assert!(reply.body.contains("an API key is required"), "{reply:?}");
    }
    let forged = [
        ("x-api-key", "inline-key-abcdef"),
        ("x-api-key-name", "root"),
    ];
    for reply in each_protocol(addr, &certs, "GET", "/a", &forged, b"").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-api-key-name").as_deref(),
            Some("ops"),
            "{}",
            reply.protocol
        );
        assert_eq!(
            reply.upstream_saw("x-api-key"),
            None,
            "the key went upstream over {}",
            reply.protocol
        );
    }
    for reply in each_protocol(
        addr,
        &certs,
        "GET",
        "/q?api_key=file-key-0123456789&x=1",
        &[],
        b"",
    )
    .await
    {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-api-key-name").as_deref(),
            Some("ci"),
            "{}",
            reply.protocol
        );
    }
    let wrong = [("x-api-key", "inline-key-abcdeX")];
    for reply in each_protocol(addr, &certs, "GET", "/", &wrong, b"").await {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert!(
            !reply.body.contains("inline-key"),
            "the key echoed: {reply:?}"
        );
    }

    // The file changes: the old file key stops working, the new one works.
    std::fs::write(&file, "ci2: rotated-key-9876543210\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let replies = each_protocol(
            addr,
            &certs,
            "GET",
            "/",
            &[("x-api-key", "rotated-key-9876543210")],
            b"",
        )
        .await;
        if replies.iter().all(|r| r.status == 200) {
            assert_eq!(
                replies[0].upstream_saw("x-api-key-name").as_deref(),
                Some("ci2")
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the keys file was not re-read"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let old = each_protocol(
        addr,
        &certs,
        "GET",
        "/",
        &[("x-api-key", "file-key-0123456789")],
        b"",
    )
    .await;
    assert!(old.iter().all(|r| r.status == 401), "{old:?}");

    let config = config_doc(&proxy).await;
    assert!(config.contains("\"api_key\""), "{config}");
    assert!(!config.contains("inline-key-abcdef"), "{config}");
    assert!(config.contains("(redacted sha256:"), "{config}");
}

/// A key in the query never goes upstream: its parameter (every one of
/// the name, also percent-encoded) is taken out of the request line of an
/// HTTP/1.1 upstream and the `:path` of an h2c one, the other parameters
/// kept byte for byte in their order; with a key in the header, a
/// parameter of the name is taken out too. Each client protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_key_is_taken_out_of_the_query_sent_upstream() {
    let echo = crate::support::Echo::start("e").await;
    let h2c = testkit::H2Server::start();
    let certs = testkit::TestCerts::generate();
    let proxy = crate::h3_support::proxy(
        &certs,
        "",
        &format!(
            "upstreams:\n  echo:\n    hosts: [\"http://{}\"]\n  h2c:\n    hosts: [\"http://{}\"]\n    protocol: h2c\n\
             middleware:\n  api_key: {{ keys: {{ ops: query-key-0123456789 }}, header: x-api-key, query: api_key }}\n\
             routes:\n  - {{ path: /h1, chain: [api_key], upstream: echo }}\n  - {{ path: /h2, chain: [api_key], upstream: h2c }}\n",
            echo.addr,
            h2c.addr()
        ),
    );
    let addr = proxy.addr();
    // What the client sends, what the upstream must get.
    let cases = [
        (
            "?a=1&api_key=query-key-0123456789&b=%20x&&c=d%3De",
            "?a=1&b=%20x&&c=d%3De",
        ),
        ("?api_key=query-key-0123456789", ""),
        (
            "?z=9&api_key=query-key-0123456789&api%5Fkey=query-key-0123456789&api_keys=1",
            "?z=9&api_keys=1",
        ),
    ];
    let mut h2c_expected = Vec::new();
    for (sent, upstream) in cases {
        for route in ["/h1", "/h2"] {
            for reply in
                each_protocol(addr, &certs, "GET", &format!("{route}{sent}"), &[], b"").await
            {
                assert_eq!(reply.status, 200, "{reply:?}");
                if route == "/h1" {
                    let line = format!("GET /h1{upstream} HTTP/1.1");
                    assert!(reply.body.contains(&line), "{}: {reply:?}", reply.protocol);
                } else {
                    h2c_expected.push(format!("/h2{upstream}"));
                }
                assert!(!reply.body.contains("query-key"), "{reply:?}");
            }
        }
    }
    // The key in its header, a parameter of the name in the query.
    let header = [("x-api-key", "query-key-0123456789")];
    for reply in each_protocol(addr, &certs, "GET", "/h1?api_key=junk&k=v", &header, b"").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert!(reply.body.contains("GET /h1?k=v HTTP/1.1"), "{reply:?}");
    }
    assert_eq!(h2c.targets(), h2c_expected);
}
