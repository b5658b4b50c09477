//! What every long-running subcommand does the same way: logging, and a
//! graceful stop on SIGTERM or SIGINT (a second signal exits at once).

use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;
use tracing::{info, warn};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr; `RUST_LOG` wins over `level`, which defaults to `info`.
pub(crate) fn init_logging(format: LogFormat, level: Option<&str>) {
    use tracing_subscriber::{fmt, EnvFilter};
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(level.unwrap_or("info")));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Blocks until SIGTERM or SIGINT, then runs `shutdown` (which drains
/// until `deadline`); a second signal meanwhile exits with status 130.
pub(crate) fn drain_on_signal(
    deadline: Duration,
    shutdown: impl FnOnce() + Send + 'static,
) -> anyhow::Result<()> {
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the signal runtime")?;
    let first = signals.block_on(next_signal())?;
    info!(signal = first, ?deadline, "shutting down");
    let draining = std::thread::spawn(shutdown);
    std::thread::spawn(move || {
        if let Ok(Ok(second)) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(next_signal()))
        {
            warn!(signal = second, "second signal; exiting without draining");
            std::process::exit(130);
        }
    });
    draining
        .join()
        .map_err(|_| anyhow::anyhow!("shutdown panicked"))
}

async fn next_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
