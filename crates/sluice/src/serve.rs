//! `sluice serve NAME`: run a reference backend until SIGINT or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use backends::{Backend, ServeOptions, TlsFiles};
use clap::Args;
use tracing::info;

use crate::process::LogFormat;

/// Run a reference backend (petstore, customers, downstream, passthrough, static).
#[derive(Debug, Args)]
#[command(after_help = "Services:\n  \
    petstore     GET /v1/pets, GET /v1/pets/{id}, POST /v1/pets (specs/petstore.yaml)\n  \
    customers    GET /customers (newest 10), GET /customers/{id}, POST /customers\n  \
    downstream   POST /messages {\"id\",\"payload\",\"delay\"}: answers after `delay` ms\n  \
    passthrough  POST /passthrough/message: forwards to --downstream's /messages\n  \
    static       any GET: a fixed body of --size bytes, after --delay\n\n\
Examples:\n  \
    sluice serve petstore --workers 1\n  \
    sluice serve downstream --listen 127.0.0.1:8081\n  \
    sluice serve passthrough --listen 127.0.0.1:8082 --downstream http://127.0.0.1:8081\n  \
    sluice serve static --listen 127.0.0.1:9000 --size 1024\n  \
    sluice cert --out certs\n  \
    sluice serve petstore --tls-cert certs/server.pem --tls-key certs/server.key.pem\n\n\
Plain listeners speak HTTP/1.1 and HTTP/2 with prior knowledge (h2c); with\n\
--tls-cert, TLS 1.2/1.3 with ALPN h2 or http/1.1.\n\n\
SIGINT or SIGTERM stops accepting and lets in-flight requests finish until\n\
--shutdown-deadline; a second signal exits at once.")]
pub(crate) struct ServeArgs {
    /// The service to run.
    #[arg(value_parser = parse_backend)]
    service: Backend,
    /// Address to listen on (port 0 picks a free port, printed at start).
    #[arg(short, long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Worker threads, each with its own listener (SO_REUSEPORT) and runtime [default: number of CPUs]
    #[arg(short, long, value_parser = parse_workers)]
    workers: Option<usize>,
    /// Body size in bytes for `static`.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// How long `static` waits before each answer (e.g. 40ms: a slow host).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// Base URL of the downstream for `passthrough`.
    #[arg(long, default_value = "http://127.0.0.1:8081", value_parser = parse_downstream)]
    downstream: http::Uri,
    /// How long `passthrough` waits for the downstream before answering 504.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    downstream_timeout: Duration,
    /// How long in-flight requests may run after SIGINT/SIGTERM.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_deadline: Duration,
    /// Serve TLS with this certificate chain (PEM), e.g. from `sluice cert`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Log format on stderr; the level comes from RUST_LOG (default: info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

fn parse_backend(name: &str) -> Result<Backend, String> {
    name.parse()
}

fn parse_workers(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(workers) if workers >= 1 => Ok(workers),
        _ => Err(format!(
            "invalid worker count `{text}`: expected a whole number >= 1"
        )),
    }
}

/// `http://HOST:PORT[/base]`: passthrough speaks plain HTTP/1.1 to its downstream.
fn parse_downstream(text: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|_| format!("invalid URL `{text}`: expected http://HOST:PORT"))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(format!("invalid URL `{text}`: expected http://HOST:PORT"));
    }
    Ok(uri)
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let _ = crate::process::init_logging(args.log_format, None);
    let defaults = ServeOptions::default();
    let options = ServeOptions {
        listen: args.listen,
        workers: args.workers.unwrap_or(defaults.workers),
        static_size: args.size,
        static_delay: args.delay,
        downstream: args.downstream,
        downstream_timeout: args.downstream_timeout,
        shutdown_deadline: args.shutdown_deadline,
        // clap makes each flag require the other.
        tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key }),
    };
    let fd_limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0);
    let server = backends::start(args.service, &options)?;
    let signals = crate::process::StopSignals::listen()?;
    // Scripts read the bound address from this line when they ask for port 0.
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    println!(
        "sluice serve {} listening on {scheme}://{}",
        args.service,
        server.local_addr()
    );
    info!(fd_limit, "open-file limit");

    signals.drain(options.shutdown_deadline, move || server.shutdown())?;
    info!("stopped");
    Ok(())
}
