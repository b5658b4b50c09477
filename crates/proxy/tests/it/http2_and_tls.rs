//! HTTP/2 and TLS on both sides of the proxy: ALPN, h2c prior knowledge,
//! translation both ways with trailers, multiplexed upstream connections,
//! upstream certificate failures and the flood limits.

use crate::support;

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use support::{
    h2_client, h2_exchange,
    h2raw::{frame, goaway_code},
    Echo, Proxy,
};
use tls::{rustls::pki_types::ServerName, tokio_rustls::TlsConnector, LocalCa};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// Certificates written to a temporary directory.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sluice-h2-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca =
            LocalCa::generate(&format!("sluice {name} CA"), Duration::from_secs(3600)).unwrap();
        std::fs::write(dir.join("ca.pem"), &ca.ca.cert_pem).unwrap();
        let server = ca
            .server(&["localhost".into(), "127.0.0.1".into()])
            .unwrap();
        std::fs::write(dir.join("server.pem"), &server.cert_pem).unwrap();
        std::fs::write(dir.join("server.key"), &server.key_pem).unwrap();
        Self { dir }
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    fn client_config(&self, alpn: &[&[u8]]) -> TlsConnector {
        let config =
            tls::client_config(tls::Trust::CaFile(&self.dir.join("ca.pem")), None, alpn).unwrap();
        TlsConnector::from(Arc::new(config))
    }

    fn server_config(&self, alpn: &[&[u8]]) -> tls::tokio_rustls::TlsAcceptor {
        let identity = tls::Identity {
            cert: &self.dir.join("server.pem"),
            key: &self.dir.join("server.key"),
        };
        let config = tls::server_config(identity, None, alpn).unwrap();
        tls::tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_proxy(certs: &Certs, upstreams_and_routes: &str) -> Proxy {
    let listener = format!(
        "listeners:\n  - address: 127.0.0.1:0\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n",
        certs.path("server.pem"),
        certs.path("server.key")
    );
    Proxy::start_yaml(&format!("workers: 1\n{listener}{upstreams_and_routes}"))
}

fn get(uri: &str) -> Request<()> {
    Request::get(uri).body(()).unwrap()
}

/// An HTTP/2 upstream: answers `/slow` after 300 ms, `/grpc` with
/// trailers, anything else with the request's method, path, authority,
/// `te` and body. Counts connections.
struct H2Upstream {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl H2Upstream {
    async fn start(tls: Option<tls::tokio_rustls::TlsAcceptor>, max_streams: u32) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_h2(stream, max_streams).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve_h2(stream, max_streams).await;
                            }
                        }
                    }
                });
            }
        });
        Self { addr, connections }
    }
}

async fn serve_h2<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: T, max_streams: u32) {
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(max_streams)
        .handshake::<_, Bytes>(io)
        .await
    else {
        return;
    };
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        tokio::spawn(async move {
            let (parts, mut body) = request.into_parts();
            let mut received = Vec::new();
            while let Some(Ok(data)) = body.data().await {
                let _ = body.flow_control().release_capacity(data.len());
                received.extend_from_slice(&data);
            }
            let path = parts.uri.path().to_string();
            if path == "/slow" {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let text = format!(
                "method={} path={} authority={} te={} xfp={} body={}",
                parts.method,
                parts.uri.path_and_query().map_or("", |p| p.as_str()),
                parts.uri.authority().map_or("", |a| a.as_str()),
                parts.headers.get("te").map_or("", |v| v.to_str().unwrap()),
                parts
                    .headers
                    .get("x-forwarded-proto")
                    .map_or("", |v| v.to_str().unwrap()),
                String::from_utf8_lossy(&received)
            );
            let response = Response::builder()
                .status(200)
                .header("content-type", "text/plain")
                .body(())
                .unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            if path == "/grpc" {
                send.send_data(Bytes::from(text), false).unwrap();
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", "0".parse().unwrap());
                trailers.insert("grpc-message", "fine".parse().unwrap());
                send.send_trailers(trailers).unwrap();
            } else {
                send.send_data(Bytes::from(text), true).unwrap();
            }
        });
    }
}

/// Writes `request` on a new connection (closing after it) and returns all that comes back.
async fn http1_raw<T: AsyncRead + AsyncWrite + Unpin>(mut io: T, request: &str) -> String {
    io.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), io.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_picks_h2_or_http11_on_a_tls_listener() {
    let certs = Certs::new("alpn");
    let echo = Echo::start("one").await;
    let proxy = tls_proxy(&certs, &support::one_upstream(echo.addr, ""));
    let name = ServerName::try_from("localhost").unwrap();

    let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    let tls = certs
        .client_config(&[b"h2", b"http/1.1"])
        .connect(name.clone(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let sender = h2_client(tls).await;
    let (response, body, _) = h2_exchange(&sender, get("https://localhost/hello?x=1"), b"").await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("GET /hello?x=1 HTTP/1.1"), "{body}");
    assert!(body.contains("host: localhost"), "{body}");
    assert!(body.contains("x-forwarded-proto: https"), "{body}");

    let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    let tls = certs
        .client_config(&[b"http/1.1"])
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let answer = http1_raw(
        tls,
        "GET /plain HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("x-forwarded-proto: https"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_prior_knowledge_and_http11_share_the_plaintext_port() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://example.test/submit")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .body(())
        .unwrap();
    let (response, body, _) = h2_exchange(&sender, request, b"twelve bytes").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("connection").is_none());
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("POST /submit HTTP/1.1"), "{body}");
    assert!(body.contains("host: example.test"), "{body}");
    assert!(body.contains("cookie: a=1; b=2"), "{body}");
    assert!(body.contains("body-bytes: 12"), "{body}");
    // HTTP/1.1 still works on the same port.
    let answer = http1_raw(
        TcpStream::connect(proxy.addr()).await.unwrap(),
        "GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http11_client_to_h2c_upstream_gets_trailers_in_a_chunked_body() {
    let upstream = H2Upstream::start(None, 100).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  grpc:\n    hosts: [\"http://{}\"]\n    protocol: h2c\nroutes:\n  - {{ path: /, upstream: grpc }}\n",
        upstream.addr
    ));
    let answer = http1_raw(
        TcpStream::connect(proxy.addr()).await.unwrap(),
        "POST /grpc HTTP/1.1\r\nhost: svc.test\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("transfer-encoding: chunked"), "{answer}");
    assert!(
        answer
            .contains("method=POST path=/grpc authority=svc.test te=trailers xfp=http body=hello"),
        "{answer}"
    );
    assert!(
        answer.ends_with("0\r\ngrpc-status: 0\r\ngrpc-message: fine\r\n\r\n"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_client_to_h2_tls_upstream_passes_grpc_trailers() {
    let certs = Certs::new("grpc");
    let upstream = H2Upstream::start(Some(certs.server_config(&[b"h2"])), 100).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  grpc:\n    hosts: [\"https://localhost:{}\"]\n    protocol: h2\n    tls: {{ ca: \"{}\" }}\nroutes:\n  - {{ path: /, upstream: grpc }}\n",
        upstream.addr.port(),
        certs.path("ca.pem")
    ));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://api.test/grpc")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, body, trailers) = h2_exchange(&sender, request, b"ping").await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains("method=POST path=/grpc authority=api.test te=trailers"),
        "{body}"
    );
    let trailers = trailers.expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(trailers["grpc-message"], "fine");
    // Several requests share one multiplexed upstream connection.
    for _ in 0..5 {
        let (response, _, _) = h2_exchange(&sender, get("http://api.test/x"), b"").await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(upstream.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_upstream_connection_makes_the_proxy_open_another() {
    let upstream = H2Upstream::start(None, 2).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  slow:\n    hosts: [\"http://{}\"]\n    protocol: h2c\nroutes:\n  - {{ path: /, upstream: slow }}\n",
        upstream.addr
    ));
    // Two connections are opened before the first handshake ends at most;
    // warm one up so that the count below is about stream limits.
    let warm = http1_raw(
        TcpStream::connect(proxy.addr()).await.unwrap(),
        "GET /warm HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(warm.starts_with("HTTP/1.1 200"), "{warm}");
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let addr = proxy.addr();
        tasks.push(tokio::spawn(async move {
            http1_raw(
                TcpStream::connect(addr).await.unwrap(),
                "GET /slow HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
            )
            .await
        }));
    }
    for task in tasks {
        let answer = task.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let connections = upstream.connections.load(Ordering::SeqCst);
    assert!(
        (3..=6).contains(&connections),
        "6 concurrent streams at 2 per connection took {connections} connections"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_or_misnamed_upstream_certificates_give_502() {
    let trusted = Certs::new("trusted");
    let other = Certs::new("other");
    let untrusted = H2Upstream::start(Some(other.server_config(&[b"h2"])), 100).await;
    let misnamed = H2Upstream::start(Some(trusted.server_config(&[b"h2"])), 100).await;
    let proxy = Proxy::start(&format!(
        "upstreams:
  untrusted:
    hosts: [\"https://127.0.0.1:{}\"]
    protocol: h2
    retries: 0
    tls: {{ ca: \"{ca}\" }}
  misnamed:
    hosts: [\"https://127.0.0.1:{}\"]
    protocol: h2
    retries: 0
    tls: {{ ca: \"{ca}\", server_name: other.test }}
routes:
  - {{ path: /untrusted, upstream: untrusted }}
  - {{ path: /misnamed, upstream: misnamed }}
",
        untrusted.addr.port(),
        misnamed.addr.port(),
        ca = trusted.path("ca.pem")
    ));
    for (path, why) in [
        ("/untrusted", "UnknownIssuer"),
        ("/misnamed", "not valid for name"),
    ] {
        let answer = http1_raw(
            TcpStream::connect(proxy.addr()).await.unwrap(),
            &format!("GET {path} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("application/problem+json"), "{answer}");
        // The client learns the kind of failure; the certificate's names,
        // the upstream's name and address stay in the log (issue 26).
        assert!(
            answer.contains("the upstream could not be reached"),
            "{answer}"
        );
        for internal in [
            why,
            "TLS",
            "localhost",
            "untrusted",
            "misnamed",
            "127.0.0.1",
        ] {
            let body = answer.split("\r\n\r\n").nth(1).unwrap();
            assert!(!body.contains(internal), "{internal} in {answer}");
        }
    }
}

/// GET / with the static HPACK table: :method GET, :scheme http, :path /.
const HEADERS_GET: &[u8] = &[0x82, 0x86, 0x84];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_gets_goaway_enhance_your_calm() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    for i in 0..200u32 {
        let id = 2 * i + 1;
        out.extend(frame(0x1, 0x4 | 0x1, id, HEADERS_GET));
        out.extend(frame(0x3, 0, id, &8u32.to_be_bytes()));
    }
    stream.write_all(&out).await.unwrap();
    assert_eq!(
        goaway_code(&mut stream, Duration::from_secs(5)).await,
        Some(0xb),
        "ENHANCE_YOUR_CALM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_gets_goaway() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    // HEADERS without END_HEADERS, then CONTINUATION frames of a header
    // that never ends (literal, new name "x", value 16 KiB... in pieces).
    out.extend(frame(0x1, 0x1, 1, HEADERS_GET));
    let piece = [0x40, 0x01, b'x', 0x01, b'y'];
    let flood = frame(0x9, 0, 1, &piece.repeat(200));
    for _ in 0..2000 {
        out.extend_from_slice(&flood);
    }
    let _ = stream.write_all(&out).await;
    // The HTTP/2 codec counts CONTINUATION frames against the header list
    // limit (vendor/h2's too_many_continuations) and goes away calmly,
    // long before the block outgrows the limit (COMPRESSION_ERROR).
    assert_eq!(
        goaway_code(&mut stream, Duration::from_secs(5)).await,
        Some(0xb),
        "GOAWAY ENHANCE_YOUR_CALM after a CONTINUATION flood"
    );
}
