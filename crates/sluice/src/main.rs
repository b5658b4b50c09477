//! `sluice`: the sidecar proxy, its load generator, reference backends and benchmark.

mod allocator;
mod bench;
mod cert;
mod cli;
mod load;
mod load_merge;
mod load_plan;
mod process;
mod proxy;
mod secret;
mod serve;
mod token;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Load(Box<load::LoadArgs>),
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
        Command::Load(args) => return load::run(*args),
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
