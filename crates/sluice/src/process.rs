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
/// Returns what sets a new `level` (a configuration reload); it does
/// nothing while `RUST_LOG` is set.
pub(crate) fn init_logging(
    format: LogFormat,
    level: Option<&str>,
) -> impl Fn(Option<&str>) + Send + Sync + 'static {
    use tracing_subscriber::{
        fmt, layer::SubscriberExt as _, reload, util::SubscriberInitExt as _, EnvFilter,
    };
    let from_env = EnvFilter::try_from_default_env().ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level.unwrap_or("info")));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .init(),
    }
    move |level: Option<&str>| {
        if fixed {
            return;
        }
        let level = level.unwrap_or("info");
        match handle.reload(EnvFilter::new(level)) {
            Ok(()) => info!(level, "log level changed"),
            Err(err) => warn!(%err, "cannot change the log level"),
        }
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
