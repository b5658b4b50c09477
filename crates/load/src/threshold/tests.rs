use super::*;
use crate::figures::CheckCount;

fn figures(latencies_us: &[u64]) -> Figures {
    let mut figures = Figures::new(true, 2);
    for &us in latencies_us {
        figures.latency.record(us).unwrap();
        figures.status[200] += 1;
    }
    figures
}

fn observed<'a>(figures: &'a Figures, names: &'a [String]) -> Observed<'a> {
    Observed {
        figures,
        elapsed_s: 10.0,
        due: Some(1000.0),
        unsent: 3,
        check_names: names,
    }
}

fn verdict(text: &str, figures: &Figures) -> bool {
    let names = ["status 200".to_string(), "fast".to_string()];
    Threshold::parse(text)
        .unwrap_or_else(|err| panic!("{err}"))
        .evaluate(&observed(figures, &names))
        .0
}

#[test]
fn latency_percentiles_and_statistics() {
    let all = figures(&[1_000; 99]);
    let mut slow = all.clone();
    slow.latency.record(9_000).unwrap();
    for (text, expected) in [
        ("p99 < 5ms", true),
        ("p(99) < 1ms", false),
        ("p(99) <= 1ms", true),
        ("p100 < 5ms", false),
        ("max < 9ms", false),
        ("max <= 9.1ms", true),
        ("avg < 1.1ms", true),
        ("med == 1ms", true),
        ("min >= 1000us", true),
    ] {
        assert_eq!(verdict(text, &slow), expected, "{text}");
    }
}

#[test]
fn errors_failed_and_non_2xx_are_shares_or_counts() {
    let mut some = figures(&[1_000; 999]);
    some.errors.timeout = 1;
    assert!(verdict("errors < 0.2%", &some));
    assert!(!verdict("errors < 0.1%", &some));
    assert!(verdict("errors.timeout == 1", &some));
    assert!(verdict("errors.connect == 0", &some));
    some.status[500] += 10;
    some.latency.record(1_000).unwrap();
    assert!(!verdict("non_2xx < 1%", &some));
    assert!(verdict("non_2xx <= 10", &some));
    assert!(!verdict("failed < 1%", &some));
    assert!(verdict("failed < 1.2%", &some));
}

#[test]
fn rates_against_the_target_and_counts() {
    let at_rate = figures(&[500; 990]);
    // 990 answers in 10 s against 1000 due: 99/s of 100/s.
    assert!(verdict("rate >= 0.98 * target", &at_rate));
    assert!(!verdict("rate >= 0.995 * target", &at_rate));
    assert!(verdict("rate > 90", &at_rate));
    assert!(verdict("requests == 990", &at_rate));
    assert!(verdict("unsent < 5", &at_rate));
    assert!(!verdict("unsent == 0", &at_rate));
    let names = [String::new(), String::new()];
    let mut closed = observed(&at_rate, &names);
    closed.due = None;
    let threshold = Threshold::parse("rate >= target").unwrap();
    let (passed, shown) = threshold.evaluate(&closed);
    assert!(!passed && shown.contains("no target rate"), "{shown}");
}

#[test]
fn checks_overall_and_by_name() {
    let mut checked = figures(&[1_000]);
    checked.checks = vec![
        CheckCount {
            passed: 1000,
            failed: 0,
        },
        CheckCount {
            passed: 990,
            failed: 10,
        },
    ];
    assert!(verdict("checks > 99%", &checked));
    assert!(!verdict("checks > 99.9%", &checked));
    assert!(verdict("checks.status 200 == 100%", &checked));
    assert!(!verdict("checks.fast > 99.5%", &checked));
    assert_eq!(
        Threshold::parse("checks.fast > 99%").unwrap().check_name(),
        Some("fast")
    );
}

#[test]
fn no_data_fails() {
    let empty = Figures::new(false, 0);
    assert!(!verdict("p99 < 1s", &empty));
    assert!(!verdict("errors < 1%", &empty));
    assert!(!verdict("checks > 1%", &empty));
    assert!(!verdict("uncorrected.p99 < 1s", &empty));
    assert!(verdict("requests == 0", &empty));
}

#[test]
fn phases_are_read_from_their_histograms() {
    let mut phased = figures(&[1_000]);
    phased.phases.waiting.record(800).unwrap();
    phased.phases.connect.record(50).unwrap();
    phased.lateness.as_mut().unwrap().record(20_000).unwrap();
    assert!(verdict("ttfb.p99 < 1ms", &phased));
    assert!(verdict("waiting.max == 800us", &phased));
    assert!(verdict("connect.p(90) < 100us", &phased));
    assert!(verdict("lateness.p99 < 20.1us", &phased));
    assert!(!verdict("tls.max < 1s", &phased));
}

#[test]
fn bad_thresholds_say_what_is_expected() {
    for (text, expected) in [
        ("p99 5ms", "no comparison"),
        ("p99 < 5", "needs a unit"),
        ("p99 < 5 parsecs", "the value is"),
        ("p101 < 5ms", "the figure is"),
        ("speed < 5ms", "the figure is"),
        ("nap.p99 < 5ms", "not a phase"),
        ("errors < 101%", "0% to 100%"),
        ("errors.oops < 1%", "the kinds are"),
        ("checks > 5", "share"),
        ("rate > 5ms", "do not compare"),
        ("checks. > 1%", "name a check"),
        ("p99 =< 5ms", "the comparison is"),
        ("p99 < -5ms", "the value is"),
        ("", "no comparison"),
    ] {
        let err = Threshold::parse(text).expect_err(text);
        assert!(err.contains(expected), "{text}: {err}");
    }
}
