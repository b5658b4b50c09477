//! HTTP/3 under abuse (docs/LIFECYCLE-h3.md): a flood of QUIC Initial
//! packets from many loopback sources meets Retry (no handshake state;
//! with `retry: never` the handshake answers, within the amplification limit),
//! a client that never reads loses its stream after `limits.send_timeout`,
//! and shutdown lets a request in flight finish.

use crate::h3_support;
use crate::support;

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use h3_support::{proxy, Client};
use http::{Request, StatusCode};
use testkit::TestCerts;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, UdpSocket},
};

/// A QUIC Initial packet (a real client's first datagram, encrypted with
/// the Initial keys of a fresh connection ID) for `target`.
fn initial_packet(
    endpoint: &mut quinn_proto::Endpoint,
    config: &quinn_proto::ClientConfig,
    target: SocketAddr,
) -> Vec<u8> {
    let now = Instant::now();
    let (_, mut conn) = endpoint
        .connect(now, config.clone(), target, "localhost")
        .unwrap();
    let mut buf = Vec::new();
    let transmit = conn.poll_transmit(now, 1, &mut buf).expect("an Initial");
    buf.truncate(transmit.size);
    buf
}

/// The type of a long-header packet (RFC 9000 17.2): 0 Initial, 3 Retry.
/// The fixed bit (0x40) is left out: a peer may grease it (RFC 9287).
fn long_header_type(packet: &[u8]) -> Option<u8> {
    let first = *packet.first()?;
    (first & 0x80 != 0).then_some((first & 0x30) >> 4)
}

fn is_retry(packet: &[u8]) -> bool {
    long_header_type(packet) == Some(3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initial_flood_with_retry_always_gets_retries_and_clients_are_still_served() {
    let certs = TestCerts::generate();
    let echo = support::Echo::start("e").await;
    let proxy = proxy(
        &certs,
        "    h3: { retry: always }\n",
        &support::one_upstream(echo.addr, ""),
    );
    let target = proxy.addr();
    let tls = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, &[b"h3"]).unwrap();
    let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn_proto::ClientConfig::new(Arc::new(quic));
    let mut endpoint = quinn_proto::Endpoint::new(Default::default(), None, false, None);
    const SOURCES: u8 = 8;
    const PER_SOURCE: usize = 25;
    let mut retries = 0;
    for source in 0..SOURCES {
        // Sources 127.0.0.2 to 127.0.0.9: none ever answers the Retry.
        let socket = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, source + 2), 0))
            .await
            .unwrap();
        for _ in 0..PER_SOURCE {
            let packet = initial_packet(&mut endpoint, &config, target);
            socket.send_to(&packet, target).await.unwrap();
        }
        let mut reply = vec![0u8; 2048];
        for _ in 0..PER_SOURCE {
            let wait = Duration::from_secs(5);
            let (n, _) = tokio::time::timeout(wait, socket.recv_from(&mut reply))
                .await
                .expect("an answer to each Initial")
                .unwrap();
            assert!(is_retry(&reply[..n]), "not a Retry: {:02x?}", &reply[..8]);
            retries += 1;
        }
    }
    assert_eq!(retries, usize::from(SOURCES) * PER_SOURCE);
    // A real client answers the Retry with its token and is served.
    let mut client = Client::connect(target, &certs).await;
    let (response, _) = client.get("/").await;
    assert_eq!(response.status(), StatusCode::OK);
}

/// An upstream whose `/big` answer is 32 MiB; `wrote_all` turns true if
/// all of it was written, `broke` if the proxy closed the connection.
struct Big {
    addr: SocketAddr,
    broke: Arc<AtomicBool>,
}

async fn big_upstream() -> Big {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let broke = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&broke);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let broke = Arc::clone(&flag);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let big = String::from_utf8_lossy(&buf[..n]).starts_with("GET /big");
                    let len = if big { 32 << 20 } else { 2 };
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        return broke.store(true, Ordering::SeqCst);
                    }
                    let chunk = vec![b'x'; 64 * 1024];
                    let mut left = len;
                    while left > 0 {
                        let take = left.min(chunk.len());
                        if stream.write_all(&chunk[..take]).await.is_err() {
                            return broke.store(true, Ordering::SeqCst);
                        }
                        left -= take;
                    }
                }
            });
        }
    });
    Big { addr, broke }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_loses_its_stream_and_the_upstream_exchange_ends() {
    let certs = TestCerts::generate();
    let upstream = big_upstream().await;
    let mut rest = support::one_upstream(upstream.addr, "");
    rest.push_str("limits: { send_timeout: 1s }\n");
    let proxy = proxy(&certs, "", &rest);
    let mut client = Client::connect(proxy.addr(), &certs).await;
    let request = Request::get("https://localhost/big").body(()).unwrap();
    let mut stream = client.send.send_request(request).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // Not a byte read: the proxy gives up on the stream, and with it the
    // upstream exchange (its connection closed mid-body).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !upstream.broke.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the upstream exchange never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut received = 0usize;
    let ended = loop {
        match stream.recv_data().await {
            Ok(Some(chunk)) => received += bytes::Buf::remaining(&chunk),
            Ok(None) => break "finished",
            Err(_) => break "reset",
        }
    };
    assert_eq!(ended, "reset", "after {received} bytes");
    assert!(received < 32 << 20, "{received} bytes");
    // The connection serves on.
    let (response, body) = client.get("/small").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body, "xx");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retry_never_an_initial_is_answered_by_the_handshake_itself() {
    let certs = TestCerts::generate();
    let echo = support::Echo::start("e").await;
    let proxy = proxy(
        &certs,
        "    h3: { retry: never }\n",
        &support::one_upstream(echo.addr, ""),
    );
    let target = proxy.addr();
    let tls = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, &[b"h3"]).unwrap();
    let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn_proto::ClientConfig::new(Arc::new(quic));
    let mut endpoint = quinn_proto::Endpoint::new(Default::default(), None, false, None);
    let socket = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 10), 0))
        .await
        .unwrap();
    socket
        .send_to(&initial_packet(&mut endpoint, &config, target), target)
        .await
        .unwrap();
    let mut reply = vec![0u8; 2048];
    let wait = Duration::from_secs(5);
    let (n, _) = tokio::time::timeout(wait, socket.recv_from(&mut reply))
        .await
        .expect("an answer to the Initial")
        .unwrap();
    // An Initial (type 0) carrying the server's handshake, no Retry; at
    // most three times the 1200 bytes sent (the amplification limit).
    let kind = long_header_type(&reply[..n]);
    assert_eq!(kind, Some(0), "not an Initial: {:02x?}", &reply[..8]);
    assert!(n <= 3 * 1200, "{n} bytes");
}

/// Every datagram the endpoint sends to `socket` within `window`, in bytes.
async fn bytes_back(socket: &UdpSocket, window: Duration) -> usize {
    let mut total = 0;
    let mut reply = vec![0u8; 65_536];
    let deadline = tokio::time::Instant::now() + window;
    while let Ok(Ok((n, _))) = tokio::time::timeout_at(deadline, socket.recv_from(&mut reply)).await
    {
        total += n;
    }
    total
}

/// Before a client's address is validated the endpoint sends at most three
/// times what it received (RFC 9000 8.1), counting its loss-probe
/// retransmissions: measured on a raw socket that never answers, for one
/// Initial and for a burst of Initials from one address. (quinn alone sent
/// a whole datagram while any budget was left: 3,822 bytes for 1,200.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_address_validation_the_endpoint_sends_at_most_three_times_what_it_got() {
    let certs = TestCerts::generate();
    let echo = support::Echo::start("e").await;
    let proxy = proxy(
        &certs,
        "    h3: { retry: never }\n",
        &support::one_upstream(echo.addr, ""),
    );
    let target = proxy.addr();
    let tls = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, &[b"h3"]).unwrap();
    let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn_proto::ClientConfig::new(Arc::new(quic));
    let mut endpoint = quinn_proto::Endpoint::new(Default::default(), None, false, None);
    for (source, initials) in [(11u8, 1usize), (12, 10)] {
        let socket = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, source), 0))
            .await
            .unwrap();
        let mut sent = 0;
        for _ in 0..initials {
            let packet = initial_packet(&mut endpoint, &config, target);
            sent += packet.len();
            socket.send_to(&packet, target).await.unwrap();
        }
        // The first flight, then the loss probes after about 1 s and 3 s.
        let back = bytes_back(&socket, Duration::from_millis(3_500)).await;
        println!("{initials} Initials: {sent} bytes sent, {back} back within 3.5 s");
        assert!(back > 0, "no answer to {initials} Initials");
        assert!(
            back <= 3 * sent,
            "{back} bytes back for {sent} sent ({initials} Initials)"
        );
    }
}
