//! What the subcommands that run load share (`sluice load`, `sluice load
//! merge`, `sluice bench`): argument parsers, the interrupt watcher, and
//! how a report is written. A leaf: it uses none of them.

use std::{
    path::Path,
    process::ExitCode,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use load::{Report, ThinkTime};

/// wrk accepts `10` as ten seconds; humantime wants a unit.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    load::parse_duration(text)
}

/// `1s..2s`, `1s-2s` or `1s` (min = max); bare numbers are seconds.
pub(crate) fn parse_think(text: &str) -> Result<ThinkTime, String> {
    ThinkTime::parse(text)
}

/// Prints the text report (on stderr when the log takes stdout) and writes
/// the JSON one.
pub(crate) fn write_report(report: &Report, to_stderr: bool, json: Option<&Path>) -> ExitCode {
    if to_stderr {
        eprint!("{}", report.to_text());
    } else {
        print!("{}", report.to_text());
    }
    if let Some(path) = json {
        let written = serde_json::to_vec_pretty(report)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(path, json));
        if let Err(err) = written {
            eprintln!("sluice load: error: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// The first Ctrl-C (SIGINT) or SIGTERM ends the run and prints what was
/// measured (a bench run also stops its components); a second exits at
/// once.
pub(crate) fn watch_interrupts(interrupt: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            for round in 0.. {
                let code = tokio::select! {
                    _ = int.recv() => 130,
                    _ = term.recv() => 143,
                };
                if round > 0 {
                    std::process::exit(code);
                }
                interrupt.store(true, Ordering::Relaxed);
            }
        });
    });
}
