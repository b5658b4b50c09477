//! `sluice`: the sidecar proxy, its load generator, reference backends and benchmark.

mod bench;
mod cert;
mod load;
mod process;
mod proxy;
mod secret;
mod serve;
mod token;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: the proxy allocates per stream and
/// per request (HTTP/2 heads, header maps, tasks), and under callgrind
/// glibc's malloc/free were 13% of an HTTP/2 request's instructions;
/// with mimalloc the whole request costs 11% fewer (docs/PERFORMANCE.md,
/// "HTTP/2 clients (issue 16)"). Built with `no_thp`: with transparent
/// huge pages its arenas grew RSS in 2 MiB steps (peak 38 MB instead of
/// 28 MB moving 100 MB each way, tests/proxy_cli.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sidecar HTTP proxy, API gateway and load balancer, with the benchmark
/// toolkit that proves what it costs.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, propagate_version = true)]
#[command(after_help = "Examples:\n  \
    sluice bench --quick\n  \
    sluice proxy -c examples/petstore.yaml\n  \
    sluice load -t1 -c128 -d10s http://127.0.0.1:8080/v1/pets\n  \
    sluice serve petstore --listen 127.0.0.1:8080 --workers 1\n  \
    sluice serve static --size 1024\n  \
    sluice token keys --alg RS256 --kid demo --out certs\n  \
    sluice cert --out certs\n  \
    sluice serve passthrough --listen 127.0.0.1:8082 --downstream http://127.0.0.1:8081")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Bench(bench::BenchArgs),
    /// Run the reverse proxy from a YAML configuration.
    Proxy(proxy::ProxyArgs),
    Load(load::LoadArgs),
    Serve(serve::ServeArgs),
    /// Create test keys (JWKS + private key) and sign tokens for the jwt handler.
    Token(token::TokenArgs),
    /// Create a local CA and server and client certificates.
    Cert(cert::CertArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => return bench::run(args),
        Command::Load(args) => return load::run(args),
        Command::Proxy(args) => return proxy::run(args),
        Command::Token(args) => return token::run(args),
        Command::Cert(args) => return cert::run(args),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
