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
