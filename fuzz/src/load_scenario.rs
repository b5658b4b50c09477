//! `sluice load`'s scenario files (crates/load/src/plan): any bytes as a
//! file give a plan or an error, never a panic. An error names the file,
//! lies within it (its line at most one past the last), says what is
//! wrong on one line; reading is deterministic; a plan read is within the
//! bounds that keep the generator's memory bounded (scenarios, checks,
//! stages, thresholds, the weights' rotation).

use std::path::Path;

use load::plan::{parse, MAX_SCENARIOS, MAX_THRESHOLDS};

const FILE: &str = "fuzz-plan.yaml";

pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let first = parse(&text, Path::new(FILE));
    let second = parse(&text, Path::new(FILE));
    match (first, second) {
        (Ok(plan), Ok(again)) => {
            assert_eq!(plan.scenarios.len(), again.scenarios.len());
            assert!(!plan.scenarios.is_empty() && plan.scenarios.len() <= MAX_SCENARIOS);
            let thresholds: usize = plan.thresholds.len()
                + plan
                    .scenarios
                    .iter()
                    .map(|s| s.thresholds.len())
                    .sum::<usize>();
            assert!(thresholds <= MAX_THRESHOLDS);
            for scenario in &plan.scenarios {
                let config = &scenario.config;
                assert!(config.validate().is_ok(), "{}", scenario.name);
                assert!(config.checks.len() <= load::MAX_CHECKS);
                assert!(config.rotation_len() <= load::MAX_ROTATION);
                assert!(config.threads <= load::MAX_THREADS);
                if let Some(stages) = &config.stages {
                    assert!(stages.steps.len() <= load::stages::MAX_STAGES);
                    assert_eq!(config.duration, stages.duration());
                }
            }
        }
        (Err(error), Err(again)) => {
            assert_eq!(error, again);
            let shown = error.to_string();
            crate::assert_located(&shown, FILE, &error.message, error.line, &text);
        }
        (first, second) => panic!(
            "two reads disagree: {:?} / {:?}",
            first.map(|p| p.scenarios.len()),
            second.map(|p| p.scenarios.len())
        ),
    }
}
