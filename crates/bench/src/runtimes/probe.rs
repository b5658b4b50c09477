//! Is a runtime serving yet? A listening socket is not enough: Payara
//! Micro accepts (and answers 404) long before its WAR is deployed, so
//! readiness is a 200 on the runtime's ready path.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use anyhow::bail;

/// Pause between probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// The status of `GET path` on `addr` (HTTP/1.1, `Connection: close`), or
/// `None` if none arrives within `timeout`.
pub fn http_status(addr: SocketAddr, path: &str, timeout: Duration) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") && head.len() < 256 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    parse_status_line(&head)
}

/// `HTTP/1.1 200 OK` (or `HTTP/1.1 200 ` as Tomcat sends it) gives 200.
fn parse_status_line(line: &[u8]) -> Option<u16> {
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    words.next()?.strip_prefix("HTTP/")?;
    words.next()?.parse().ok()
}

/// Waits until `GET path` on `addr` answers 200 and returns how long that
/// took. Fails when `running` says the process has ended or after `timeout`.
pub fn wait_ready(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    running: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last = None;
    loop {
        if !running() {
            bail!("it exited before GET {path} on {addr} answered 200");
        }
        last = http_status(addr, path, Duration::from_secs(2)).or(last);
        if last == Some(200) {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= timeout {
            let seen = last.map_or("no answer".to_string(), |s| format!("last status {s}"));
            bail!(
                "GET {path} on {addr} did not answer 200 within {}s ({seen})",
                timeout.as_secs()
            );
        }
        std::thread::sleep(PROBE_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(parse_status_line(b"HTTP/1.1 404 \r\n"), Some(404));
        assert_eq!(parse_status_line(b"SSH-2.0-OpenSSH\r\n"), None);
    }

    #[test]
    fn readiness_follows_a_real_server() {
        let server = testkit::serve(testkit::Backend::Petstore);
        let addr = server.addr();
        assert_eq!(
            http_status(addr, "/v1/pets", Duration::from_secs(5)),
            Some(200)
        );
        assert_eq!(
            http_status(addr, "/nope", Duration::from_secs(5)),
            Some(404)
        );
        let waited = wait_ready(addr, "/v1/pets", Duration::from_secs(5), &mut || true);
        assert!(waited.is_ok(), "{waited:?}");
        let err = wait_ready(addr, "/nope", Duration::from_millis(300), &mut || true)
            .expect_err("never 200");
        assert!(err.to_string().contains("last status 404"), "{err}");
        let err = wait_ready(addr, "/v1/pets", Duration::from_secs(5), &mut || false)
            .expect_err("exited");
        assert!(err.to_string().contains("exited"), "{err}");
        server.shutdown();
        let closed = testkit::closed_port();
        assert_eq!(http_status(closed, "/", Duration::from_secs(1)), None);
    }
}
