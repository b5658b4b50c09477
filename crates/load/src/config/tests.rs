use super::*;

fn users(think: Option<(u64, u64)>) -> LoadConfig {
    let mut config =
        LoadConfig::new(&[(Method::GET, "http://127.0.0.1:1/".into())]).expect("valid URL");
    config.think = think.map(|(min, max)| ThinkTime {
        min: Duration::from_millis(min),
        max: Duration::from_millis(max),
    });
    config
}

fn error(config: &LoadConfig) -> String {
    config.validate().expect_err("invalid").0
}

#[test]
fn users_model_defaults_off() {
    let config = users(None);
    assert_eq!(config.think, None);
    assert_eq!(config.ramp, Duration::ZERO);
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn think_and_ramp_are_valid_in_the_closed_model() {
    let mut config = users(Some((1000, 2000)));
    config.ramp = Duration::from_secs(10);
    assert_eq!(config.validate(), Ok(()));
    // A fixed think time; a ramp longer than the run; HTTP/2 with one stream.
    let mut fixed = users(Some((500, 500)));
    fixed.ramp = Duration::from_secs(3600);
    fixed.duration = Duration::from_secs(1);
    fixed.protocol = Protocol::Http2;
    assert_eq!(fixed.validate(), Ok(()));
    // A ramp alone, with pipelining: connections start one by one.
    let mut ramp_only = users(None);
    ramp_only.ramp = Duration::from_secs(5);
    ramp_only.pipeline = 8;
    assert_eq!(ramp_only.validate(), Ok(()));
}

#[test]
fn think_min_must_not_exceed_max() {
    let message = error(&users(Some((2000, 1000))));
    assert!(message.contains("--think"), "{message}");
    assert!(message.contains("must not exceed the maximum"), "{message}");
}

#[test]
fn think_needs_the_closed_model_and_one_request_in_flight() {
    let mut rate = users(Some((10, 20)));
    rate.rate = Some(100.0);
    let message = error(&rate);
    assert!(
        message.contains("--think") && message.contains("--rate"),
        "{message}"
    );

    let mut pipelined = users(Some((10, 20)));
    pipelined.pipeline = 4;
    let message = error(&pipelined);
    assert!(
        message.contains("--think") && message.contains("--pipeline"),
        "{message}"
    );

    let mut streams = users(Some((10, 20)));
    streams.protocol = Protocol::Http2;
    streams.streams = 8;
    let message = error(&streams);
    assert!(
        message.contains("--think") && message.contains("--streams"),
        "{message}"
    );
}

#[test]
fn ramp_needs_the_closed_model_and_at_most_a_year() {
    let mut rate = users(None);
    rate.rate = Some(100.0);
    rate.ramp = Duration::from_secs(1);
    let message = error(&rate);
    assert!(
        message.contains("--ramp") && message.contains("--rate"),
        "{message}"
    );

    let mut long = users(None);
    long.ramp = Duration::from_secs(u64::MAX);
    let message = error(&long);
    assert!(
        message.contains("--ramp must be at most a year"),
        "{message}"
    );

    let mut long_think = users(None);
    long_think.think = Some(ThinkTime {
        min: Duration::ZERO,
        max: Duration::from_secs(u64::MAX),
    });
    let message = error(&long_think);
    assert!(
        message.contains("--think must be at most a year"),
        "{message}"
    );
}
