use super::*;

fn returned<A, B, F: Future>(_: fn(A, B) -> F) -> usize {
    std::mem::size_of::<F>()
}

/// Waiting for the next request is part of every idle connection's
/// future: it stays small (a slow write is boxed, see `write_bounded`).
#[test]
fn waiting_for_a_request_takes_little_room() {
    let size = returned(ServerConnection::<TcpStream>::read_more as fn(_, _) -> _);
    assert!(size <= 384, "read_more's future is {size} bytes");
}

/// Pipelined answers leave together, at the latest a window after the
/// batch began; each flush starts the next batch's window afresh (a
/// window left running made every later answer leave on its own).
#[tokio::test]
async fn each_flush_starts_a_new_batch_window() {
    let window = Duration::from_millis(10);
    let (stream, _peer) = tokio::io::duplex(1024);
    let (_tx, shutdown) = watch::channel(false);
    let mut conn = ServerConnection::new(stream, BytesMut::new(), shutdown, window);
    assert_eq!(conn.batch_ends(window), None, "nothing to write");
    conn.wbuf.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
    let first = conn.batch_ends(window).expect("an answer waits");
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(conn.batch_ends(window), Some(first), "the same batch");
    assert!(conn.flush().await);
    conn.wbuf.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
    let second = conn.batch_ends(window).expect("an answer waits");
    assert!(second >= first + Duration::from_millis(2), "a new window");
}

/// An answer that took longer than the idle timeout leaves the
/// connection idle from the answer: the next request, sent at once,
/// is read, not refused as late (and a quiet time counts from there).
#[tokio::test]
async fn idle_time_counts_from_the_answer() {
    let idle = Duration::from_secs(1);
    let deadlines = Deadlines {
        idle,
        request: idle,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    let (_tx, shutdown) = watch::channel(false);
    let mut conn = ServerConnection::new(stream, BytesMut::new(), shutdown, idle);
    client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    conn.read_more(deadlines).await.unwrap();
    conn.request_read();
    conn.rbuf.clear();
    // The upstream takes twice the idle timeout.
    tokio::time::sleep(2 * idle).await;
    conn.answered();
    let quiet = Some(conn.last_active() + idle);
    let next = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client
            .write_all(b"GET /next HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
    };
    let (read, ()) = tokio::join!(conn.read_until(deadlines, quiet), next);
    assert_eq!(read, Ok(()), "the next request is read");
    assert!(conn.rbuf.starts_with(b"GET /next"));
}
