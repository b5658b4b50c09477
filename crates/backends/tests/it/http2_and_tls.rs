//! HTTP/2 and TLS: h2c with prior knowledge beside HTTP/1.1 on the plain
//! port, and TLS with ALPN choosing h2 or http/1.1, all giving the answers
//! HTTP/1.1 gives.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use backends::{Backend, TlsFiles, MAX_JSON_BODY, PETS};
use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderMap, Method};
use testkit::{
    serve, serve_with, test_options, until, Behaviour, FakeServer, RawConn, ServeOptions,
    TestServer, IO_TIMEOUT,
};
use tls::tokio_rustls::{client::TlsStream, rustls::pki_types::ServerName, TlsConnector};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

/// A server certificate for 127.0.0.1 from a fresh CA, as files.
struct CertFiles {
    dir: PathBuf,
    ca: PathBuf,
    server: TlsFiles,
}

impl CertFiles {
    fn generate() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-backends-h2-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the certificate directory");
        let ca = tls::LocalCa::generate("backends test CA", Duration::from_secs(3600))
            .expect("a test CA");
        let issued = ca
            .server(&["127.0.0.1".into()])
            .expect("a server certificate");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write a certificate file");
            path
        };
        Self {
            ca: write("ca.pem", &ca.ca.cert_pem),
            server: TlsFiles {
                cert: write("server.pem", &issued.cert_pem),
                key: write("server.key.pem", &issued.key_pem),
            },
            dir,
        }
    }

    fn serve(&self, backend: Backend) -> TestServer {
        serve_with(
            backend,
            ServeOptions {
                tls: Some(self.server.clone()),
                ..test_options()
            },
        )
    }

    /// A TLS connection to `addr` on which the server chose `alpn`.
    async fn connect(&self, addr: SocketAddr, alpn: &[u8]) -> TlsStream<TcpStream> {
        let config = tls::client_config(tls::Trust::CaFile(&self.ca), None, &[alpn])
            .expect("a TLS client configuration");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::from(addr.ip());
        let stream = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("TLS handshake");
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(alpn));
        stream
    }

    /// Sends `request` over TLS with ALPN http/1.1 and reads until the server closes.
    async fn http11(&self, addr: SocketAddr, request: &[u8]) -> String {
        let mut tls = self.connect(addr, tls::ALPN_HTTP11).await;
        tls.write_all(request).await.expect("write the request");
        let mut answer = String::new();
        tokio::time::timeout(IO_TIMEOUT, tls.read_to_string(&mut answer))
            .await
            .expect("answer within the timeout")
            .expect("read the answer");
        answer
    }
}

impl Drop for CertFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An HTTP/2 client on `io`; the connection is driven by its own task.
async fn h2_client<T>(io: T) -> SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, conn) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// One request on its own stream; `url` carries the scheme and authority.
async fn send(
    client: &SendRequest<Bytes>,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Bytes>,
) -> Answer {
    let exchange = async {
        let mut request = http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut client = client.clone().ready().await.expect("a stream slot");
        let (response, mut stream) = client
            .send_request(request.body(()).expect("a valid request"), body.is_none())
            .expect("send the request");
        if let Some(body) = body {
            stream.send_data(body, true).expect("send the body");
        }
        let (parts, mut recv) = response.await.expect("a response").into_parts();
        let mut body = BytesMut::new();
        while let Some(data) = recv.data().await {
            let data = data.expect("a body chunk");
            recv.flow_control()
                .release_capacity(data.len())
                .expect("release capacity");
            body.extend_from_slice(&data);
        }
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: body.freeze(),
        }
    };
    tokio::time::timeout(IO_TIMEOUT, exchange)
        .await
        .expect("HTTP/2 exchange timed out")
}

async fn get(client: &SendRequest<Bytes>, url: &str) -> Answer {
    send(client, Method::GET, url, &[], None).await
}

#[tokio::test]
async fn h2c_and_http1_share_the_plain_port() {
    let server = serve(Backend::Petstore);
    let client = h2_client(TcpStream::connect(server.addr()).await.unwrap()).await;
    let h2 = get(&client, &server.url("/v1/pets")).await;
    let mut conn = RawConn::connect(server.addr()).await;
    let h1 = conn.get("/v1/pets").await;

    assert_eq!((h2.status, h1.status), (200, 200));
    assert_eq!(h2.body, PETS.as_bytes());
    assert_eq!(h1.text(), PETS);
    for name in ["content-type", "content-length"] {
        assert_eq!(h2.header(name), h1.header(name), "{name}");
    }
    assert!(h2.header("date").is_some());
    assert_eq!(h2.header("connection"), None);

    // Bytes that begin like the preface, then part from it, are HTTP/1.1.
    let mut conn = RawConn::connect(server.addr()).await;
    let not_h2 = conn.request("PRI", "/v1/pets", &[], b"").await;
    assert_eq!(not_h2.status, 405);
}

#[tokio::test]
async fn h2c_answers_as_http1_does() {
    let server = serve(Backend::Petstore);
    let client = h2_client(TcpStream::connect(server.addr()).await.unwrap()).await;
    assert_eq!(
        get(&client, &server.url("/v1/pets/2")).await.json()["name"],
        "doggy"
    );

    let created = send(
        &client,
        Method::POST,
        &server.url("/v1/pets"),
        &[("content-type", "application/json")],
        Some(Bytes::from_static(br#"{"id":7,"name":"seven"}"#)),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.header("location"), Some("/v1/pets/7"));

    let head = send(&client, Method::HEAD, &server.url("/v1/pets"), &[], None).await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(&*PETS.len().to_string())
    );
    assert!(head.body.is_empty());

    let missing = get(&client, &server.url("/nope")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.header("content-type"),
        Some("application/problem+json")
    );
}

/// Streams of one connection do not wait for each other: 20 delays of
/// 500 ms take about 500 ms, and one after another would take 10 s; the
/// limit is half of that.
#[tokio::test]
async fn h2c_streams_run_concurrently() {
    let server = serve(Backend::Downstream);
    let client = h2_client(TcpStream::connect(server.addr()).await.unwrap()).await;
    let started = std::time::Instant::now();
    let streams: Vec<_> = (0..20)
        .map(|i| {
            let (client, url) = (client.clone(), server.url("/messages"));
            tokio::spawn(async move {
                let body = format!(r#"{{"id":"{i}","delay":500}}"#);
                let json = [("content-type", "application/json")];
                send(&client, Method::POST, &url, &json, Some(body.into())).await
            })
        })
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        assert_eq!(stream.await.unwrap().json()["id"], i.to_string());
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "streams took {took:?}");
}

/// The preface split across TCP segments is still recognised.
#[tokio::test]
async fn h2c_preface_in_pieces() {
    let server = serve(Backend::Petstore);
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    for piece in [&preface[..3], &preface[3..13], &preface[13..]] {
        tcp.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An empty SETTINGS frame; the server answers with its own SETTINGS.
    tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut frame_head = [0u8; 9];
    tokio::time::timeout(IO_TIMEOUT, tcp.read_exact(&mut frame_head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(frame_head[3], 4, "not a SETTINGS frame: {frame_head:?}");
}

#[tokio::test]
async fn h2_body_over_the_limit_is_413() {
    let server = serve(Backend::Petstore);
    let client = h2_client(TcpStream::connect(server.addr()).await.unwrap()).await;
    let url = server.url("/v1/pets");
    let json = [("content-type", "application/json")];
    let too_big = Bytes::from(vec![b' '; MAX_JSON_BODY + 1]);

    // Declared: refused before the body is read.
    let length = (MAX_JSON_BODY + 1).to_string();
    let declared = [json[0], ("content-length", length.as_str())];
    let refused = send(
        &client,
        Method::POST,
        &url,
        &declared,
        Some(too_big.clone()),
    )
    .await;
    assert_eq!(refused.status, 413);
    assert_eq!(refused.json()["status"], 413);

    // Undeclared: refused once the body passes the limit.
    let refused = send(&client, Method::POST, &url, &json, Some(too_big)).await;
    assert_eq!(refused.status, 413);

    // The connection is still good.
    assert_eq!(get(&client, &url).await.body, PETS.as_bytes());
}

#[tokio::test]
async fn tls_serves_h2_and_http1_by_alpn() {
    let certs = CertFiles::generate();
    let server = certs.serve(Backend::Petstore);
    let url = format!("https://{}/v1/pets", server.addr());

    let client = h2_client(certs.connect(server.addr(), tls::ALPN_H2).await).await;
    let h2 = get(&client, &url).await;
    assert_eq!(h2.status, 200);
    assert_eq!(h2.body, PETS.as_bytes());

    let answer = certs
        .http11(
            server.addr(),
            b"GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with(&format!("\r\n\r\n{PETS}")), "{answer}");

    // Inside TLS, HTTP/2 is chosen by ALPN only: the preface is no request.
    let answer = certs
        .http11(server.addr(), b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_stream_in_flight_finishes_on_shutdown() {
    // `passthrough` in front of a downstream that answers 300 ms after a
    // request reaches it: the stream is in flight exactly when it has one.
    let downstream = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(300),
    });
    let server = serve_with(
        Backend::Passthrough,
        ServeOptions {
            downstream: downstream.url("").parse().expect("downstream URL"),
            ..test_options()
        },
    );
    let client = h2_client(TcpStream::connect(server.addr()).await.unwrap()).await;
    let url = server.url("/passthrough/message");
    let in_flight = tokio::spawn(async move {
        send(
            &client,
            Method::POST,
            &url,
            &[("content-type", "application/json")],
            Some(Bytes::from_static(br#"{"id":"late","delay":0}"#)),
        )
        .await
    });
    assert!(
        until(Duration::from_secs(5), || async {
            downstream.requests() == 1
        })
        .await,
        "the request never reached the downstream"
    );
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    let answer = in_flight.await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, &b"ok"[..]);
}

#[test]
fn unusable_tls_files_fail_naming_the_file() {
    let certs = CertFiles::generate();
    let missing = certs.dir.join("missing.key.pem");
    let options = ServeOptions {
        tls: Some(TlsFiles {
            cert: certs.server.cert.clone(),
            key: missing.clone(),
        }),
        ..test_options()
    };
    let err = backends::start(Backend::Petstore, &options).unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains(&missing.display().to_string()),
        "{message}"
    );
}
