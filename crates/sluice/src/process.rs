//! What every long-running subcommand does the same way: logging, and a
//! graceful stop on SIGTERM or SIGINT (a second signal exits at once).

use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;
use tokio::signal::unix::{signal, Signal, SignalKind};
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

/// SIGTERM and SIGINT, caught from the moment this is made: make it
/// before announcing that the process serves, so that a signal sent right
/// after the announcement drains instead of killing.
pub(crate) struct StopSignals {
    runtime: tokio::runtime::Runtime,
    streams: SignalStreams,
}

struct SignalStreams {
    term: Signal,
    int: Signal,
}

impl SignalStreams {
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

impl StopSignals {
    pub(crate) fn listen() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot build the signal runtime")?;
        let streams = runtime.block_on(async {
            anyhow::Ok(SignalStreams {
                term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
                int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
            })
        })?;
        Ok(Self { runtime, streams })
    }

    /// Blocks until SIGTERM or SIGINT, then runs `shutdown` (which drains
    /// until `deadline`); a second signal meanwhile exits with status 130.
    pub(crate) fn drain(
        self,
        deadline: Duration,
        shutdown: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            runtime,
            mut streams,
        } = self;
        let first = runtime.block_on(streams.next());
        info!(signal = first, ?deadline, "shutting down");
        let draining = std::thread::spawn(shutdown);
        std::thread::spawn(move || {
            let second = runtime.block_on(streams.next());
            warn!(signal = second, "second signal; exiting without draining");
            std::process::exit(130);
        });
        draining
            .join()
            .map_err(|_| anyhow::anyhow!("shutdown panicked"))
    }
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals")
    }
}
