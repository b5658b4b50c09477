//! `basic_auth` against an htpasswd file made by Apache's `htpasswd -B`
//! (Debian's apache2-utils), over each client protocol.

use std::process::Command;

use base64::Engine as _;

use super::{config_doc, each_protocol, setup};

/// An htpasswd file with `users` (name, password), made by `htpasswd -B`;
/// `None` (after a skip line) without the tool.
fn htpasswd(test: &str, path: &std::path::Path, users: &[(&str, &str)]) -> Option<()> {
    if Command::new("htpasswd").arg("-h").output().is_err() {
        testkit::skip(
            test,
            testkit::Need::Htpasswd,
            "no htpasswd (apt-get install apache2-utils)",
        );
        return None;
    }
    let _ = std::fs::remove_file(path);
    for (i, (user, password)) in users.iter().enumerate() {
        let mut command = Command::new("htpasswd");
        command.arg("-B").arg("-C").arg("5").arg("-b");
        if i == 0 {
            command.arg("-c");
        }
        let output = command.arg(path).arg(user).arg(password).output().unwrap();
        assert!(output.status.success(), "htpasswd failed: {output:?}");
    }
    Some(())
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_checks_an_apache_htpasswd_file_over_every_protocol() {
    let test = "basic_auth_checks_an_apache_htpasswd_file_over_every_protocol";
    let dir = std::env::temp_dir().join(format!("sluice-basic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("htpasswd");
    let Some(()) = htpasswd(
        test,
        &file,
        &[("alice", "correct horse"), ("bob", "battery staple")],
    ) else {
        return;
    };
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("alice:$2y$05$"));
    let middleware = format!(
        "middleware:\n  basic_auth: {{ htpasswd: \"{}\", realm: staff, forward_user: x-user, reload: 100ms }}\n",
        file.display()
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [basic_auth], upstream: echo }\n",
    )
    .await;
    let addr = proxy.addr();

    for reply in each_protocol(addr, &certs, "GET", "/", &[], b"").await {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Basic realm=\"staff\", charset=\"UTF-8\"")
        );
    }
    let good = basic("alice", "correct horse");
    let forged = [("authorization", good.as_str()), ("x-user", "root")];
    for reply in each_protocol(addr, &certs, "POST", "/p", &forged, b"hello").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-user").as_deref(),
            Some("alice"),
            "{}",
            reply.protocol
        );
        assert_eq!(
            reply.upstream_saw("authorization"),
            None,
            "{}",
            reply.protocol
        );
        assert!(reply.body.contains("body-bytes: 5"), "{reply:?}");
    }
    for (user, password) in [
        ("alice", "correct horsE"),
        ("mallory", "correct horse"),
        ("bob", ""),
    ] {
        let wrong = basic(user, password);
        for reply in each_protocol(
            addr,
            &certs,
            "GET",
            "/",
            &[("authorization", wrong.as_str())],
            b"",
        )
        .await
        {
            assert_eq!(reply.status, 401, "{user} over {reply:?}");
            assert!(
                reply.body.contains("the user or the password is wrong"),
                "{reply:?}"
            );
            assert!(
                !reply.body.contains(password) || password.is_empty(),
                "{reply:?}"
            );
        }
    }
    let mangled = each_protocol(
        addr,
        &certs,
        "GET",
        "/",
        &[("authorization", "Basic %%%")],
        b"",
    )
    .await;
    assert!(mangled.iter().all(|r| r.status == 401), "{mangled:?}");

    // bob's password changes in the file: the old one stops working.
    htpasswd(
        test,
        &file,
        &[("alice", "correct horse"), ("bob", "new password")],
    )
    .unwrap();
    let new = basic("bob", "new password");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let replies = each_protocol(
            addr,
            &certs,
            "GET",
            "/",
            &[("authorization", new.as_str())],
            b"",
        )
        .await;
        if replies.iter().all(|r| r.status == 200) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the htpasswd file was not re-read"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let config = config_doc(&proxy).await;
    assert!(
        config.contains("\"basic_auth\"") && !config.contains("correct horse"),
        "{config}"
    );
}
