//! Floods and abuse on the proxy's HTTP/2 listener, sent as raw frames: the
//! protections the HTTP/2 codec gives (vendor/h2, a fork of the `h2`
//! crate: vendor/h2/SLUICE.md) must hold, whatever is changed in it. The
//! CONTINUATION flood and rapid reset are in h2.rs.

use crate::support;

use std::{net::SocketAddr, time::Duration};

use support::{
    h2raw::{self, frame, kind, Reader, ACK, END_HEADERS, END_STREAM},
    Echo, Proxy,
};
use tokio::{io::AsyncWriteExt, net::TcpStream};

const ENHANCE_YOUR_CALM: u32 = 0xb;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const REFUSED_STREAM: u32 = 0x7;

/// The most bytes a client that never reads can push into the proxy
/// before the proxy must stop reading, if it answers each frame only as
/// its answers drain: the kernel's largest receive and send buffers on both
/// ends (`tcp_rmem`, `tcp_wmem`: the proxy's receive buffer and its send
/// buffer of answers, the client's receive buffer of answers and its send
/// buffer), and 4 MiB for the proxy's own buffers. A proxy that queued an
/// answer for every frame it read would never stop reading.
fn backlog_bound() -> usize {
    let largest = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|line| line.split_whitespace().nth(2)?.parse::<usize>().ok())
            .unwrap_or(8 << 20)
    };
    2 * (largest("/proc/sys/net/ipv4/tcp_rmem") + largest("/proc/sys/net/ipv4/tcp_wmem"))
        + (4 << 20)
}

/// Writes `unit` over and over without reading anything, until the proxy
/// stops reading (a write makes no progress for a second: true) or closes
/// the connection (false); panics if it takes more than `backlog_bound`.
async fn flood_without_reading(io: &mut TcpStream, unit: &[u8]) -> bool {
    let chunk = unit.repeat(64 * 1024 / unit.len());
    let bound = backlog_bound();
    let mut written = 0;
    while written <= bound {
        match tokio::time::timeout(Duration::from_secs(1), io.write_all(&chunk)).await {
            Err(_) => return true,
            Ok(Err(_)) => return false,
            Ok(Ok(())) => written += chunk.len(),
        }
    }
    panic!("the proxy read {written} bytes of a flood it could not answer: no backpressure");
}

/// A GET / on a fresh raw connection gets a 200 (`:status 200` is
/// static-table entry 8) within 5 s.
async fn serves_another_client(addr: SocketAddr) {
    let (mut io, mut reader) = h2raw::connect(addr).await;
    let block = h2raw::request_block("GET", "/");
    io.write_all(&frame(kind::HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .await
        .unwrap();
    let head = reader
        .until(&mut io, Duration::from_secs(5), |f| {
            f.kind == kind::HEADERS && f.stream == 1
        })
        .await
        .expect("another client's request is answered during the flood");
    assert_eq!(head.payload.first(), Some(&0x88), ":status 200");
}

/// Pings (or SETTINGS) each want an answer: a client that sends them and
/// never reads gets the proxy to stop reading once its answers back up,
/// and costs other clients nothing. Then, reading, it gets at most one
/// answer per frame.
async fn answered_only_as_fast_as_read(unit: Vec<u8>, is_answer: fn(&h2raw::Frame) -> bool) {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let (mut io, mut reader) = h2raw::connect(proxy.addr()).await;
    let stalled = flood_without_reading(&mut io, &unit).await;
    assert!(
        stalled,
        "the proxy closed the connection instead of pacing it"
    );
    serves_another_client(proxy.addr()).await;
    let mut answers = 0u64;
    while let Some(frame) = reader.next(&mut io, Duration::from_secs(1)).await {
        if is_answer(&frame) {
            answers += 1;
        }
        if answers >= 1000 {
            break;
        }
    }
    assert!(answers >= 1000, "the flood's frames are answered once read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_is_answered_only_as_fast_as_it_is_read() {
    let ping = frame(kind::PING, 0, 0, &[7; 8]);
    answered_only_as_fast_as_read(ping, |f| f.kind == kind::PING && f.flags & ACK != 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_flood_is_answered_only_as_fast_as_it_is_read() {
    // SETTINGS_INITIAL_WINDOW_SIZE = 65,535: valid, and acknowledged each time.
    let settings = frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]);
    answered_only_as_fast_as_read(settings, |f| f.kind == kind::SETTINGS && f.flags & ACK != 0)
        .await;
}

/// Opens stream 1 as a POST whose body never ends; the connection.
async fn open_upload(proxy: &Proxy) -> (TcpStream, Reader) {
    let (mut io, reader) = h2raw::connect(proxy.addr()).await;
    let block = h2raw::request_block("POST", "/upload");
    io.write_all(&frame(kind::HEADERS, END_HEADERS, 1, &block))
        .await
        .unwrap();
    (io, reader)
}

/// The GOAWAY's error code, if one comes within 5 s of quiet.
async fn goaway(io: &mut TcpStream, reader: &mut Reader) -> Option<u32> {
    reader
        .until(io, Duration::from_secs(5), |f| f.kind == kind::GOAWAY)
        .await?
        .error_code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_data_flood_gets_goaway_enhance_your_calm() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let (mut io, mut reader) = open_upload(&proxy).await;
    // The codec allows 100 empty DATA frames on a connection.
    let flood = frame(kind::DATA, 0, 1, &[]).repeat(1000);
    let _ = io.write_all(&flood).await;
    assert_eq!(goaway(&mut io, &mut reader).await, Some(ENHANCE_YOUR_CALM));
    serves_another_client(proxy.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_update_past_the_largest_window_is_a_flow_control_error() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start(&support::one_upstream(echo.addr, ""));
    let (mut io, mut reader) = h2raw::connect(proxy.addr()).await;
    // The connection's send window starts at 65,535: 2^31 - 1 more is past
    // the largest window (RFC 9113 6.9.1).
    let increment = 0x7fff_ffffu32.to_be_bytes();
    io.write_all(&frame(kind::WINDOW_UPDATE, 0, 0, &increment))
        .await
        .unwrap();
    assert_eq!(goaway(&mut io, &mut reader).await, Some(FLOW_CONTROL_ERROR));
    // On a stream, the stream alone is reset.
    let (mut io, mut reader) = open_upload(&proxy).await;
    io.write_all(&frame(kind::WINDOW_UPDATE, 0, 1, &increment))
        .await
        .unwrap();
    let reset = reader
        .until(&mut io, Duration::from_secs(5), |f| {
            f.kind == kind::RST_STREAM || f.kind == kind::GOAWAY
        })
        .await
        .expect("an answer to the overflow");
    assert_eq!(
        (reset.kind, reset.stream, reset.error_code()),
        (kind::RST_STREAM, 1, Some(FLOW_CONTROL_ERROR))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_concurrency_limit_are_refused() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start_with(
        "workers: 1\nhttp2: { max_concurrent_streams: 2 }",
        &support::one_upstream(echo.addr, ""),
    );
    let (mut io, mut reader) = h2raw::connect(proxy.addr()).await;
    // Three uploads that never end: the third is over the limit of 2.
    let block = h2raw::request_block("POST", "/upload");
    for id in [1, 3, 5] {
        io.write_all(&frame(kind::HEADERS, END_HEADERS, id, &block))
            .await
            .unwrap();
    }
    let refused = reader
        .until(&mut io, Duration::from_secs(5), |f| {
            f.kind == kind::RST_STREAM
        })
        .await
        .expect("a stream past the limit is reset");
    assert_eq!(
        (refused.stream, refused.error_code()),
        (5, Some(REFUSED_STREAM))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpack_bomb_is_refused_and_never_reaches_the_upstream() {
    let echo = Echo::start("one").await;
    let proxy = Proxy::start_with(
        "workers: 1\nlimits: { max_header_bytes: 16KiB }",
        &support::one_upstream(echo.addr, ""),
    );
    let (mut io, mut reader) = h2raw::connect(proxy.addr()).await;
    // One 4,000-byte field put in the dynamic table (literal with
    // incremental indexing, new name "x-bomb"), then named again by its
    // index (62) 2,000 times: a 2 KB block that decodes to 8 MB.
    let mut block = h2raw::request_block("GET", "/");
    block.extend_from_slice(&[0x40, 6]);
    block.extend_from_slice(b"x-bomb");
    block.extend_from_slice(&[0x7f, 0xa1, 0x1e]); // 4,000 = 127 + 3,873
    block.extend(std::iter::repeat_n(b'b', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, 2000));
    // One frame (under the default SETTINGS_MAX_FRAME_SIZE, 16 KiB).
    assert!(block.len() < 16 * 1024);
    io.write_all(&frame(kind::HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .await
        .unwrap();
    let answer = reader
        .until(&mut io, Duration::from_secs(5), |f| {
            f.stream == 1 && (f.kind == kind::HEADERS || f.kind == kind::RST_STREAM)
                || f.kind == kind::GOAWAY
        })
        .await
        .expect("an answer to the bomb");
    // 8 MB decoded is far past the abuse limit of the h2 codec
    // (SETTINGS_MAX_HEADER_LIST_SIZE times MAX_HEADER_LIST_ABUSE_MULTIPLIER,
    // vendor/h2 frame/headers.rs): it
    // stops decoding and closes the connection, no stream processed
    // (last stream 0), ENHANCE_YOUR_CALM naming why.
    assert_eq!(answer.kind, kind::GOAWAY, "{answer:?}");
    assert_eq!(answer.payload[..4], [0, 0, 0, 0], "last stream: {answer:?}");
    assert_eq!(answer.error_code(), Some(ENHANCE_YOUR_CALM), "{answer:?}");
    assert_eq!(&answer.payload[8..], b"header_list_way_too_large");
    assert_eq!(
        echo.requests.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing reached the upstream"
    );
    serves_another_client(proxy.addr()).await;
}
