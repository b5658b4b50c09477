//! The reference backends behind `sluice serve`: small services that every
//! benchmark and integration test stands on, over HTTP/1.1 and HTTP/2
//! (h2c with prior knowledge, or TLS with ALPN `h2` / `http/1.1`).
//!
//! Each service is a [`Backend`]; [`start`] binds it on one listener per
//! worker (`SO_REUSEPORT`, a current-thread runtime per worker) and returns a
//! [`RunningServer`] that reports its address and shuts down gracefully.

mod customers;
mod downstream;
mod h1;
mod http2;
pub mod message;
mod passthrough;
mod petstore;
pub mod problem;
mod request;
mod server;
mod static_body;

use std::{fmt, net::SocketAddr, path::PathBuf, str::FromStr, time::Duration};

use http::Uri;

use crate::message::{Request, Response};

pub use customers::CAPACITY as CUSTOMERS_CAPACITY;
pub use downstream::MAX_DELAY_MS;
pub use petstore::PETS;
pub use request::MAX_JSON_BODY;
pub use server::{start, RunningServer};

/// The services `sluice serve` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `GET /v1/pets`, `GET /v1/pets/{id}`, `POST /v1/pets` (specs/petstore.yaml).
    Petstore,
    /// `GET /customers`, `GET /customers/{id}`, `POST /customers` (seeds/004).
    Customers,
    /// `POST /messages`: answers after the requested delay (seeds/003).
    Downstream,
    /// `POST /passthrough/message`: forwards to a downstream (seeds/003).
    Passthrough,
    /// Any `GET`: a fixed body of a chosen size (seeds/002).
    Static,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Petstore,
        Backend::Customers,
        Backend::Downstream,
        Backend::Passthrough,
        Backend::Static,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Petstore => "petstore",
            Backend::Customers => "customers",
            Backend::Downstream => "downstream",
            Backend::Passthrough => "passthrough",
            Backend::Static => "static",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Backend::ALL.iter().map(|b| b.name()).collect();
                format!(
                    "unknown service `{s}`; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

/// How to run a backend. `Default` gives what `sluice serve` uses without flags.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Worker threads, each with its own runtime and listener.
    pub workers: usize,
    /// Body size of the `static` service, in bytes.
    pub static_size: usize,
    /// How long `static` waits before each answer (a slow host for `lb-slow`).
    pub static_delay: Duration,
    /// Where `passthrough` forwards to (scheme, host and port; `/messages` is appended).
    pub downstream: Uri,
    /// How long `passthrough` waits for the downstream before answering 504.
    pub downstream_timeout: Duration,
    /// How long in-flight requests may run after a shutdown signal.
    pub shutdown_deadline: Duration,
    /// Serve TLS with this certificate and key instead of plain TCP.
    pub tls: Option<TlsFiles>,
}

/// PEM files of a TLS server identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            static_size: 1024,
            static_delay: Duration::ZERO,
            downstream: Uri::from_static("http://127.0.0.1:8081"),
            downstream_timeout: Duration::from_secs(10),
            shutdown_deadline: Duration::from_secs(10),
            tls: None,
        }
    }
}

/// One worker's instance of a service. Built per worker so that the hot
/// path shares no reference counts or pools across cores.
#[derive(Debug, Clone)]
enum App {
    Petstore,
    Customers(customers::Customers),
    Downstream,
    /// Boxed: its HTTP client is large (more so with the workspace's
    /// hyper-util features unified), and the other variants are small.
    Passthrough(Box<passthrough::Passthrough>),
    Static(static_body::StaticBody),
}

impl App {
    async fn handle(&self, req: &Request<'_>) -> Response {
        match self {
            App::Petstore => petstore::handle(req),
            App::Customers(store) => store.handle(req),
            App::Downstream => downstream::handle(req).await,
            App::Passthrough(client) => client.handle(req).await,
            App::Static(body) => body.handle(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_round_trip() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>(), Ok(backend));
        }
        let err = "nope".parse::<Backend>().unwrap_err();
        assert!(err.contains("petstore"), "{err}");
    }
}
