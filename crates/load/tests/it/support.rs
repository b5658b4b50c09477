//! What every module's runs share.

use load::{LoadConfig, Report, RunControl};

/// Runs `config` to its end; a run that cannot start fails the test.
pub(crate) fn run(config: &LoadConfig) -> Report {
    load::run(config, RunControl::default()).expect("the run completes")
}
