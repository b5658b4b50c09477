use super::*;
use crate::report::fixture;

/// The fixture with the row `label` of `group` `factor` times as fast
/// (its req/s and each round's), its latencies divided by it.
fn scaled(mut results: Results, group: &str, label: &str, factor: f64) -> Results {
    let row = results
        .groups
        .iter_mut()
        .find(|g| g.name == group)
        .and_then(|g| g.rows.iter_mut().find(|r| r.label == label))
        .expect("the row");
    for figures in std::iter::once(&mut row.figures).chain(row.rounds.iter_mut()) {
        figures.requests_per_sec *= factor;
        let l = &mut figures.latency;
        l.p95_us = (l.p95_us as f64 / factor) as u64;
    }
    results
}

#[test]
fn a_deliberately_slower_row_regresses_and_only_it() {
    let baseline = fixture();
    // 20% fewer req/s in every round: past 5%, and the rounds agree.
    let current = scaled(fixture(), "proxy", "sluice -> petstore", 0.8);
    let comparison = compare(&current, &baseline, 0.05);
    let regressed: Vec<&RowComparison> = comparison.regressions().collect();
    assert_eq!(regressed.len(), 1, "{}", comparison.to_text());
    assert_eq!(regressed[0].label, "sluice -> petstore");
    assert_eq!(regressed[0].figure, "req/s");
    assert!((regressed[0].worse_by.unwrap() - 0.2).abs() < 1e-9);
    assert!(
        comparison
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Same)
            .count()
            > 50
    );
    let text = comparison.to_text();
    assert!(text.contains("1 regressed, 0 too noisy"), "{text}");
    assert!(
        text.contains("  REGRESSED proxy: sluice -> petstore (sluice): req/s"),
        "{text}"
    );
    // The same run against itself: nothing to say.
    let same = compare(&baseline, &baseline, 0.05);
    assert_eq!(same.regressions().count(), 0);
    assert!(same.rows.iter().all(|r| r.verdict == Verdict::Same));
}

#[test]
fn a_change_within_the_rounds_spread_is_too_noisy_to_judge() {
    let baseline = fixture();
    // 6% slower on the medians, but the fixture's rounds spread from 0.97
    // to 1.02 of the median: this run's best round beats the baseline's worst.
    let mut current = scaled(fixture(), "proxy", "sluice -> petstore", 0.94);
    let row = current
        .groups
        .iter_mut()
        .find(|g| g.name == "proxy")
        .unwrap();
    let row = row
        .rows
        .iter_mut()
        .find(|r| r.label == "sluice -> petstore")
        .unwrap();
    row.rounds[2].requests_per_sec *= 1.1;
    let comparison = compare(&current, &baseline, 0.05);
    assert_eq!(
        comparison.regressions().count(),
        0,
        "{}",
        comparison.to_text()
    );
    let noisy: Vec<&RowComparison> = comparison
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Noisy)
        .collect();
    assert_eq!(noisy.len(), 1);
    // A wider limit takes it as the same.
    assert_eq!(
        compare(&current, &baseline, 0.1)
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Noisy)
            .count(),
        0
    );
}

#[test]
fn latency_groups_regress_on_p95_and_rows_come_and_go() {
    let baseline = fixture();
    // The users group is judged on p95: twice as slow is worse.
    let current = scaled(fixture(), "io", "sluice users=300", 0.5);
    let comparison = compare(&current, &baseline, 0.05);
    let regressed: Vec<&RowComparison> = comparison.regressions().collect();
    assert_eq!(regressed.len(), 1, "{}", comparison.to_text());
    assert_eq!(regressed[0].figure, "p95 µs");
    // A row renamed: new here, missing there; neither fails the gate.
    let mut renamed = fixture();
    renamed.groups[1].rows[0].label = "sluice -> petstore (renamed)".into();
    let comparison = compare(&renamed, &baseline, 0.05);
    let verdicts: Vec<Verdict> = comparison
        .rows
        .iter()
        .filter(|r| r.verdict != Verdict::Same)
        .map(|r| r.verdict)
        .collect();
    assert_eq!(verdicts, [Verdict::New, Verdict::Missing]);
    assert_eq!(comparison.regressions().count(), 0);
}

#[test]
fn the_limit_parses_as_a_share() {
    assert_eq!(parse_max_regression("5%"), Ok(0.05));
    assert_eq!(parse_max_regression("0.05"), Ok(0.05));
    assert_eq!(parse_max_regression(" 12.5 % "), Ok(0.125));
    for bad in ["", "-5%", "0", "five", "2000%"] {
        assert!(parse_max_regression(bad).is_err(), "{bad}");
    }
}
