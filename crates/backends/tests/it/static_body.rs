//! `static` over real sockets.

use backends::Backend;
use testkit::{serve, serve_with, test_options, RawConn, ServeOptions};

#[tokio::test]
async fn any_path_gets_the_default_kilobyte() {
    let server = serve(Backend::Static);
    let mut conn = RawConn::connect(server.addr()).await;
    for path in ["/", "/any/thing", "/x?y=z"] {
        let response = conn.get(path).await;
        assert_eq!(response.status, 200);
        assert_eq!(response.body.len(), 1024);
        assert_eq!(response.header("content-type"), Some("text/plain"));
    }
}

#[tokio::test]
async fn size_is_configurable() {
    // 1 MiB is written from its own buffer rather than copied into the write buffer.
    for size in [0, 1, 65_536, 1024 * 1024] {
        let server = serve_with(
            Backend::Static,
            ServeOptions {
                static_size: size,
                ..test_options()
            },
        );
        let mut conn = RawConn::connect(server.addr()).await;
        assert_eq!(conn.get("/").await.body.len(), size);
    }
}

#[tokio::test]
async fn delay_holds_each_answer_back() {
    let server = serve_with(
        Backend::Static,
        ServeOptions {
            static_delay: std::time::Duration::from_millis(150),
            ..test_options()
        },
    );
    let mut conn = RawConn::connect(server.addr()).await;
    let started = std::time::Instant::now();
    assert_eq!(conn.get("/").await.status, 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(150));
}

#[tokio::test]
async fn only_get_and_head() {
    let server = serve(Backend::Static);
    let mut conn = RawConn::connect(server.addr()).await;
    let head = conn.request("HEAD", "/", &[], b"").await;
    assert_eq!(head.header("content-length"), Some("1024"));
    let post = conn.request("POST", "/", &[], b"x").await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    assert_eq!(
        post.header("content-type"),
        Some("application/problem+json")
    );
}
