//! The seeds' own backends (bench/runtimes): Spring MVC on Tomcat, Spring
//! WebFlux on Netty, Go's net/http, Node's http module, Jersey on Grizzly
//! and Payara Micro. Each answers, for the endpoints it shares with `sluice
//! serve`, exactly the status, content type and body sluice's backend does,
//! so that a row against a runtime measures the runtime, not the payload.
//!
//! [`Toolchains::detect`] finds java+mvn, go and node; [`prepare`] builds a
//! runtime on first use into a cache folder named by a hash of its sources
//! (the sources are compiled into this crate, see build.rs) and reports
//! progress; the [`Built`] runtime gives the command line that starts it
//! on a loopback port and the versions a report records.

mod build;
mod probe;
mod sources;
mod toolchain;
mod versions;

use std::{fmt, str::FromStr, time::Duration};

pub use build::{default_cache_dir, prepare, BuildEvent, Built, CommandLine, Outcome};
pub use probe::{http_status, wait_ready};
pub use toolchain::{Tool, Toolchain, Toolchains};

/// Body size of the hello world: `sluice serve static --size 12` answers
/// every GET with `abcdefghijkl` as text/plain, and every runtime answers
/// `GET /` with the same bytes (no sluice service answers a greeting, so the
/// smallest fixed body stands in for one).
pub const HELLO_SIZE: usize = 12;

/// One of the seeds' backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// Spring Boot 3, Spring MVC on Tomcat; the passthrough blocks on RestClient.
    SpringMvc,
    /// Spring Boot 3, WebFlux on Reactor Netty; the passthrough uses WebClient.
    Webflux,
    /// Go's net/http, standard library only.
    GoHttp,
    /// Node's http module, no dependencies.
    Node,
    /// Jersey on the Grizzly HTTP server, Jackson for JSON.
    Grizzly,
    /// Payara Micro (the jar from Maven Central) running a small WAR.
    Payara,
}

/// An endpoint a runtime shares with `sluice serve`, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// `GET /` (seeds/001).
    Hello,
    /// `GET /v1/pets` (seeds/000).
    Petstore,
    /// `GET /customers`, `POST /customers` (seeds/004).
    Customers,
    /// `POST /passthrough/message` to a downstream's `/messages` (seeds/003).
    Passthrough,
}

impl Service {
    /// The `sluice serve` service answering the same bytes.
    pub fn backend(self) -> backends::Backend {
        match self {
            Service::Hello => backends::Backend::Static,
            Service::Petstore => backends::Backend::Petstore,
            Service::Customers => backends::Backend::Customers,
            Service::Passthrough => backends::Backend::Passthrough,
        }
    }

    /// `sluice serve` arguments for that service (the hello world needs `--size`).
    pub fn serve_args(self) -> Vec<String> {
        let mut args = vec![self.backend().name().to_string()];
        if self == Service::Hello {
            args.extend(["--size".to_string(), HELLO_SIZE.to_string()]);
        }
        args
    }

    /// The path the seeds load.
    pub fn path(self) -> &'static str {
        match self {
            Service::Hello => "/",
            Service::Petstore => "/v1/pets",
            Service::Customers => "/customers",
            Service::Passthrough => "/passthrough/message",
        }
    }
}

impl Runtime {
    pub const ALL: [Runtime; 6] = [
        Runtime::SpringMvc,
        Runtime::Webflux,
        Runtime::GoHttp,
        Runtime::Node,
        Runtime::Grizzly,
        Runtime::Payara,
    ];

    /// The folder under bench/runtimes and the name rows use.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::SpringMvc => "spring-mvc",
            Runtime::Webflux => "webflux",
            Runtime::GoHttp => "go-http",
            Runtime::Node => "node",
            Runtime::Grizzly => "grizzly",
            Runtime::Payara => "payara",
        }
    }

    /// The endpoints it answers as `sluice serve` does.
    pub fn services(self) -> &'static [Service] {
        use Service::*;
        match self {
            Runtime::SpringMvc | Runtime::Webflux => &[Hello, Petstore, Customers, Passthrough],
            Runtime::GoHttp | Runtime::Node => &[Hello, Petstore],
            Runtime::Grizzly | Runtime::Payara => &[Customers],
        }
    }

    pub fn serves(self, service: Service) -> bool {
        self.services().contains(&service)
    }

    pub fn toolchain(self) -> Toolchain {
        match self {
            Runtime::SpringMvc | Runtime::Webflux | Runtime::Grizzly | Runtime::Payara => {
                Toolchain::Jvm
            }
            Runtime::GoHttp => Toolchain::Go,
            Runtime::Node => Toolchain::Node,
        }
    }

    /// A JVM: a fresh process is "cold" (seeds/004), and its first round
    /// is a warm-up to discard otherwise.
    pub fn is_jvm(self) -> bool {
        self.toolchain() == Toolchain::Jvm
    }

    /// A GET that answers 200 only once the app serves: Payara Micro
    /// accepts connections (and answers 404) seconds before its WAR is
    /// deployed. Never `/customers`: seeds/004's cold row measures a fresh
    /// JVM's first customers requests, so the JAX-RS apps (which serve
    /// nothing else) answer `/ready`, and the Spring apps are asked for
    /// their hello world.
    pub fn ready_path(self) -> &'static str {
        match self {
            Runtime::Grizzly | Runtime::Payara => "/ready",
            _ => self.services()[0].path(),
        }
    }

    /// How long it may take to answer [`Runtime::ready_path`] on a busy
    /// 2-core machine (measured: Spring Boot about 7 s, Payara Micro about
    /// 25 s), with room to spare.
    pub fn start_timeout(self) -> Duration {
        Duration::from_secs(match self {
            Runtime::GoHttp | Runtime::Node => 10,
            Runtime::Grizzly => 30,
            Runtime::SpringMvc | Runtime::Webflux => 60,
            Runtime::Payara => 120,
        })
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Runtime {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Runtime::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Runtime::ALL.iter().map(|r| r.name()).collect();
                format!(
                    "unknown runtime `{s}`; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for runtime in Runtime::ALL {
            assert_eq!(runtime.name().parse::<Runtime>(), Ok(runtime));
        }
        let err = "tomcat".parse::<Runtime>().unwrap_err();
        assert!(err.contains("spring-mvc"), "{err}");
    }

    #[test]
    fn every_seed_service_has_runtimes() {
        for service in [
            Service::Hello,
            Service::Petstore,
            Service::Customers,
            Service::Passthrough,
        ] {
            assert!(
                Runtime::ALL.iter().any(|r| r.serves(service)),
                "{service:?}"
            );
        }
        assert!(Runtime::Payara.serves(Service::Customers));
        assert!(!Runtime::Node.serves(Service::Customers));
    }

    #[test]
    fn hello_is_the_static_service_at_twelve_bytes() {
        assert_eq!(Service::Hello.serve_args(), ["static", "--size", "12"]);
        assert_eq!(Service::Petstore.serve_args(), ["petstore"]);
        assert_eq!(Runtime::Node.ready_path(), "/");
    }

    /// The probe leaves the measured customers endpoint to the cold row.
    #[test]
    fn readiness_is_probed_off_the_cold_rows_endpoint() {
        for runtime in Runtime::ALL {
            assert_ne!(runtime.ready_path(), Service::Customers.path(), "{runtime}");
        }
        assert_eq!(Runtime::Payara.ready_path(), "/ready");
        assert_eq!(Runtime::Grizzly.ready_path(), "/ready");
        assert_eq!(Runtime::SpringMvc.ready_path(), "/");
    }
}
