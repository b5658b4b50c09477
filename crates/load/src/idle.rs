//! Idle connections: each makes one request, reads its whole answer and
//! then stays open doing nothing, the way keep-alive clients sit on a
//! proxy between requests. What memory per connection is measured with
//! (`sluice bench`'s `idle` group, crates/sluice/tests/it/idle_memory.rs).
//! Blocking sockets, one connection after another: the point is how many
//! are open, not how fast they opened.

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// What the connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleProtocol {
    /// HTTP/1.1 keep-alive, one `GET`.
    Http1,
    /// HTTP/2 with prior knowledge (h2c), one `GET` on stream 1.
    H2,
}

impl IdleProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP/1.1",
            Self::H2 => "HTTP/2",
        }
    }
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How long one request may take before the connection counts as failed.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens a connection to `addr`, sends `GET path` with `host`, reads the
/// answer (a 2xx, else an error) and returns the open connection.
pub fn open_idle(
    addr: SocketAddr,
    protocol: IdleProtocol,
    host: &str,
    path: &str,
) -> io::Result<TcpStream> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    match protocol {
        IdleProtocol::Http1 => http1_exchange(&mut conn, host, path)?,
        IdleProtocol::H2 => h2_exchange(&mut conn, host, path)?,
    }
    Ok(conn)
}

fn broken(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn read_more(conn: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    let n = conn.read(&mut chunk)?;
    if n == 0 {
        return Err(broken("closed before the answer"));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// One request; the answer must have a Content-Length (what proxies in
/// front of the bench backends send).
fn http1_exchange(conn: &mut TcpStream, host: &str, path: &str) -> io::Result<()> {
    conn.write_all(format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())?;
    let mut answer = Vec::new();
    let (head_len, length) = loop {
        read_more(conn, &mut answer)?;
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut fields);
        let head_len = match response.parse(&answer) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => continue,
            Err(err) => return Err(broken(format!("bad answer: {err}"))),
        };
        if !response.code.is_some_and(|code| (200..300).contains(&code)) {
            return Err(broken(format!("answer {:?}", response.code)));
        }
        let length: usize = response
            .headers
            .iter()
            .find(|field| field.name.eq_ignore_ascii_case("content-length"))
            .and_then(|field| std::str::from_utf8(field.value).ok()?.trim().parse().ok())
            .ok_or_else(|| broken("answer without content-length"))?;
        break (head_len, length);
    };
    while answer.len() < head_len + length {
        read_more(conn, &mut answer)?;
    }
    Ok(())
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap_or(0).to_be_bytes();
    let mut frame = len[1..].to_vec();
    frame.extend_from_slice(&[kind, flags]);
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// A string literal without Huffman coding or indexing, after `prefix`
/// (the first byte: indexed name).
fn literal(block: &mut Vec<u8>, prefix: u8, value: &str) {
    block.push(prefix);
    // Values here are short: the 7-bit length prefix suffices.
    block.push(u8::try_from(value.len()).unwrap_or(127).min(127));
    block.extend_from_slice(value.as_bytes());
}

/// Preface, SETTINGS, one GET; acknowledges the server's SETTINGS and
/// waits for stream 1 to end.
fn h2_exchange(conn: &mut TcpStream, host: &str, path: &str) -> io::Result<()> {
    // HPACK: :method GET (2), :scheme http (6), then :path (4) and
    // :authority (1) as literals without indexing.
    let mut block = vec![0x82, 0x86];
    literal(&mut block, 0x04, path);
    literal(&mut block, 0x01, host);
    let mut hello = H2_PREFACE.to_vec();
    hello.extend(frame(4, 0, 0, &[]));
    hello.extend(frame(1, 0x05, 1, &block));
    conn.write_all(&hello)?;
    let mut buf = Vec::new();
    loop {
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            buf.drain(..9 + len);
            match kind {
                7 => return Err(broken("GOAWAY")),
                3 if stream == 1 => return Err(broken("RST_STREAM")),
                4 if flags & 1 == 0 => conn.write_all(&frame(4, 1, 0, &[]))?,
                0 | 1 if stream == 1 && flags & 1 == 1 => return Ok(()),
                _ => {}
            }
        }
        read_more(conn, &mut buf)?;
    }
}

pub use crate::procfs::rss_kib;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_connections_get_their_answer_and_stay_open() {
        let server = testkit::serve(testkit::Backend::Static);
        for protocol in [IdleProtocol::Http1, IdleProtocol::H2] {
            let conn = open_idle(server.addr(), protocol, "idle.test", "/").unwrap();
            conn.set_nonblocking(true).unwrap();
            let mut byte = [0u8; 1];
            let still_open =
                matches!((&conn).read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
            assert!(still_open, "{protocol:?}");
        }
        assert!(rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }
}
