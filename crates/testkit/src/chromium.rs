//! Headless Chromium for the tests that open a page (the admin dashboard,
//! `sluice load --html`): found on PATH or skipped with a SKIP line (a
//! failure under `SLUICE_REQUIRE_CHROMIUM=1`), and run on one URL with
//! the browser's own traffic turned off where flags can.

use std::{path::Path, process::Command};

/// The Chromium binary, or `None` with a SKIP line for `test` (a panic
/// when required).
pub fn find(test: &str) -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| Command::new(name).arg("--version").output().is_ok());
    if found.is_none() {
        crate::skip(
            test,
            crate::Need::Chromium,
            "chromium is not installed (apt-get install chromium)",
        );
    }
    found
}

/// What a headless run printed: the page's output on stdout, the
/// browser's log (console messages among it) on stderr.
#[derive(Debug)]
pub struct Browsed {
    pub stdout: String,
    pub stderr: String,
}

/// Runs headless Chromium on `url` for `budget_ms` of virtual time (the
/// page's timers run that fast; its fetches are real) with `action`
/// (`--dump-dom` or `--screenshot=…`), its profile in `profile`, its
/// network log in `net_log`, its log (console messages too) on stderr.
/// Panics if Chromium fails.
pub fn run(
    binary: &str,
    profile: &Path,
    net_log: &Path,
    (action, budget_ms): (&str, u32),
    url: &str,
) -> Browsed {
    let output = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            // The browser's own requests: Autofill asks Google about a
            // page with a password field; the clock is checked online.
            "--disable-features=AutofillServerCommunication,NetworkTimeServiceQuerying",
            "--window-size=1280,900",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg(action)
        .arg(url)
        .output()
        .expect("run chromium");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "chromium {action}: {}\n{stderr}",
        output.status
    );
    Browsed {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr,
    }
}
