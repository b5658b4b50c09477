//! Test harness for sluice: real servers on ephemeral loopback ports (an
//! HTTP/2 one among them) and a raw HTTP/1.1 client that sends exactly the
//! bytes a test writes.
//!
//! ```no_run
//! # async fn demo() {
//! use testkit::{serve, Backend, RawConn};
//! let petstore = serve(Backend::Petstore);
//! let mut conn = RawConn::connect(petstore.addr()).await;
//! let response = conn.get("/v1/pets").await;
//! assert_eq!(response.status, 200);
//! # }
//! ```

pub mod backlog;
pub mod certs;
pub mod fake;
pub mod fake_h2;
pub mod fake_h3;
pub mod hostile;
pub mod otelcol;
mod poll;
mod raw;
pub mod redis;
pub mod skip;

use std::net::SocketAddr;

pub use backends::{Backend, RunningServer, ServeOptions};
pub use backlog::BacklogServer;
pub use certs::TestCerts;
pub use fake::{Behaviour, FakeServer};
pub use fake_h2::{H2Options, H2Server};
pub use fake_h3::{H3Options, H3Server};
pub use hostile::{HostileUpstream, Step};
pub use otelcol::Collector;
pub use poll::until;
pub use raw::{request_bytes, RawConn, RawResponse, IO_TIMEOUT};
pub use redis::RedisServer;
pub use skip::{skip, Need};

/// A backend running in this process on 127.0.0.1 with a free port; shut
/// down (with a short deadline) when dropped.
#[derive(Debug)]
pub struct TestServer {
    server: Option<RunningServer>,
    addr: SocketAddr,
}

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Shuts down now, honouring the server's own deadline, and waits for it.
    pub fn shutdown(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// Options for tests: loopback, port 0, one worker, a 2 s shutdown deadline.
pub fn test_options() -> ServeOptions {
    ServeOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        workers: 1,
        shutdown_deadline: std::time::Duration::from_secs(2),
        ..ServeOptions::default()
    }
}

/// Starts `backend` with [`test_options`].
pub fn serve(backend: Backend) -> TestServer {
    serve_with(backend, test_options())
}

/// Starts `backend` with the given options. Panics if it cannot bind: a
/// test cannot go on without its server.
pub fn serve_with(backend: Backend, options: ServeOptions) -> TestServer {
    let server = backends::start(backend, &options)
        .unwrap_or_else(|err| panic!("cannot start {backend} on {}: {err:#}", options.listen));
    TestServer {
        addr: server.local_addr(),
        server: Some(server),
    }
}

/// Opens `count` connections to `addr`, at most 500 connects in flight so
/// that the listen backlog never overflows. Needs a multi-thread or current
/// Tokio runtime.
pub async fn connect_many(addr: SocketAddr, count: usize) -> Vec<RawConn> {
    let mut conns = Vec::with_capacity(count);
    while conns.len() < count {
        let batch: Vec<_> = (0..500.min(count - conns.len()))
            .map(|_| tokio::spawn(RawConn::connect(addr)))
            .collect();
        for conn in batch {
            conns.push(conn.await.expect("connect task"));
        }
    }
    conns
}

/// Sends one `POST path` with JSON `body(i)` on every connection at once and
/// returns the statuses in connection order, once all have answered.
pub async fn post_json_on_each(
    conns: Vec<RawConn>,
    path: &'static str,
    body: impl Fn(usize) -> String,
) -> Vec<u16> {
    let requests: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut conn)| {
            let body = body(i);
            tokio::spawn(async move { conn.post_json(path, &body).await.status })
        })
        .collect();
    let mut statuses = Vec::with_capacity(requests.len());
    for request in requests {
        statuses.push(request.await.expect("request task"));
    }
    statuses
}

/// Raises this process's open-file limit to its hard limit and returns the
/// new soft limit, so that tests with thousands of sockets can run.
pub fn raise_fd_limit() -> u64 {
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024)
}

/// A loopback address with a port that nothing listens on (bound, then released).
pub fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("local address of a bound socket")
}
