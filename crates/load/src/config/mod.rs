//! What a run does, checked before anything starts.

mod limits;

pub use limits::{MAX_BODIES, MAX_CAPTURE, MAX_REQUESTS, MAX_ROTATION, MAX_THREADS};

use std::{
    fmt,
    path::PathBuf,
    time::{Duration, SystemTime},
};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};

use crate::{
    checks::{Check, DEFAULT_BODY_LIMIT},
    shard::Shard,
    stages::Stages,
    target::{parse_url, RequestSpec, Scheme, Target},
};

/// Everything `sluice load` needs to run. Build it with [`LoadConfig::new`]
/// and set fields; [`crate::run`] validates it.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    /// Used in turn, each as often as its weight says (round-robin when
    /// all weigh 1); all share the target's scheme, host and port.
    pub requests: Vec<RequestSpec>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    pub connections: usize,
    pub threads: usize,
    /// Run for this long after the warm-up (unless `total_requests` is set).
    pub duration: Duration,
    /// Stop after this many requests instead of after `duration`.
    pub total_requests: Option<u64>,
    /// HTTP/1.1, HTTP/2 (h2c with prior knowledge for `http://`, ALPN
    /// `h2` for `https://`), or HTTP/3 (QUIC, `https://` only).
    pub protocol: Protocol,
    /// HTTP/1.1: requests written together per connection (pipelining).
    pub pipeline: usize,
    /// HTTP/2 and HTTP/3: streams in flight per connection (h2load's `-m`).
    pub streams: usize,
    /// Open model: requests per second across all connections.
    pub rate: Option<f64>,
    /// A request without a response after this long is a timeout; also bounds connecting.
    pub timeout: Duration,
    /// Run this long first and discard it.
    pub warmup: Duration,
    /// Accept any server certificate (https).
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file (https) instead of the built-in roots.
    pub cacert: Option<PathBuf>,
    /// Users model (closed model only): after each response a connection
    /// (a user) waits a uniformly random time in this range before its
    /// next request. Needs one request in flight per connection.
    pub think: Option<ThinkTime>,
    /// Users model: connection `i` of `n` sends its first request at
    /// `start + ramp * i / n` (Gatling's `rampUsers`); zero starts all at once.
    pub ramp: Duration,
    /// This process's part of a test spread over many (`--shard i/N`):
    /// `connections`, `total_requests` and `rate` are the whole test's.
    pub shard: Shard,
    /// Start at this wall-clock time (`--start-at`), so that the shards
    /// on many machines start together.
    pub start_at: Option<SystemTime>,
    /// Names the test in its logs (`--test-id`); default a digest of the
    /// whole test's settings and `start_at`, the same on every shard.
    pub test_id: Option<String>,
    /// Write the latencies and counts as an HdrHistogram interval log
    /// (`--log`; `-` is stdout): `sluice load merge` adds such logs up.
    pub log: Option<PathBuf>,
    /// Ramping stages (k6's `ramping-arrival-rate`, `ramping-vus`): with
    /// `rate`, the rate moves through them (and `rate` is their peak);
    /// else the connections (users) do (and `connections` is their peak).
    /// They set the duration.
    pub stages: Option<Stages>,
    /// Checks on every answer, counted pass and fail.
    pub checks: Vec<Check>,
    /// Body bytes kept per answer for the checks that read it.
    pub check_body_limit: usize,
    /// Keep a summary of each second (the report's `intervals`) even
    /// without a log.
    pub intervals: bool,
}

/// A user's pause between a response and its next request: uniformly
/// random in `min..=max` (`min == max` is a fixed pause).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ThinkTime {
    pub min: Duration,
    pub max: Duration,
}

impl ThinkTime {
    /// `1s..2s`, `1s-2s` or `1s` (min = max); bare numbers are seconds.
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = |why: String| {
            format!(
                "invalid think time `{text}`: {why} (expected MIN..MAX like 1s..2s, or one time)"
            )
        };
        let (min, max) = match text.split_once("..").or_else(|| text.split_once('-')) {
            Some((min, max)) => (min.trim(), max.trim()),
            None => (text.trim(), text.trim()),
        };
        let min = parse_duration(min).map_err(invalid)?;
        let max = parse_duration(max).map_err(invalid)?;
        if min > max {
            return Err(invalid(format!("{min:?} is more than {max:?}")));
        }
        Ok(Self { min, max })
    }
}

/// A duration as wrk takes it: `10` is ten seconds; else `10s`, `500ms`, `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|err| format!("invalid duration `{text}`: {err}"))
}

/// The wire protocol of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    #[default]
    #[serde(rename = "HTTP/1.1")]
    Http1,
    #[serde(rename = "HTTP/2")]
    Http2,
    /// HTTP/3 over QUIC (https:// only), ALPN `h3`.
    #[serde(rename = "HTTP/3")]
    Http3,
}

impl Protocol {
    /// The `sluice load` flag that picks it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP/1.1 (no flag)",
            Self::Http2 => "--h2",
            Self::Http3 => "--h3",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Http1 => "HTTP/1.1",
            Self::Http2 => "HTTP/2",
            Self::Http3 => "HTTP/3",
        })
    }
}

/// Request headers that HTTP/2 forbids (RFC 9113 section 8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Longest duration, timeout or warm-up accepted.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A configuration mistake; `sluice load` prints it and exits with 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl LoadConfig {
    /// A wrk-like default run (`-t1 -c10 -d10s`, GET) of the given URLs, each
    /// optionally with its own method.
    pub fn new(urls: &[(Method, String)]) -> Result<Self, ConfigError> {
        let mut target: Option<Target> = None;
        let mut requests = Vec::with_capacity(urls.len());
        for (method, url) in urls {
            let (this, path) = parse_url(url).map_err(ConfigError)?;
            match &target {
                Some(first) if *first != this => {
                    return Err(ConfigError(format!(
                        "all URLs must share one scheme, host and port: `{url}` is not on {first}"
                    )))
                }
                Some(_) => {}
                None => target = Some(this),
            }
            requests.push(RequestSpec::new(method.clone(), url.clone(), path));
        }
        let target = target.ok_or_else(|| ConfigError("no URL given".into()))?;
        Ok(Self {
            target,
            requests,
            headers: Vec::new(),
            body: Bytes::new(),
            connections: 10,
            threads: 1,
            duration: Duration::from_secs(10),
            total_requests: None,
            protocol: Protocol::Http1,
            pipeline: 1,
            streams: 1,
            rate: None,
            timeout: Duration::from_secs(2),
            warmup: Duration::ZERO,
            insecure: false,
            cacert: None,
            think: None,
            ramp: Duration::ZERO,
            shard: Shard::WHOLE,
            start_at: None,
            test_id: None,
            log: None,
            stages: None,
            checks: Vec::new(),
            check_body_limit: DEFAULT_BODY_LIMIT,
            intervals: false,
        })
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if self.threads == 0 {
            return fail("--threads must be at least 1".into());
        }
        if self.threads > MAX_THREADS {
            return fail(format!(
                "--threads must be at most {MAX_THREADS}, got {}",
                self.threads
            ));
        }
        self.check_shard()?;
        if let Some(id) = &self.test_id {
            check_test_id(id).map_err(ConfigError)?;
        }
        if self.connections() < self.threads {
            return fail(format!(
                "--connections ({}) must be at least --threads ({}): each thread needs a connection",
                self.connections(),
                self.threads
            ));
        }
        if self.pipeline == 0 {
            return fail("--pipeline must be at least 1".into());
        }
        if self.streams == 0 {
            return fail("--streams must be at least 1".into());
        }
        match self.protocol {
            Protocol::Http1 if self.streams > 1 => {
                return fail("--streams goes with --h2 or --h3 (HTTP/1.1 uses --pipeline)".into())
            }
            Protocol::Http2 | Protocol::Http3 if self.pipeline > 1 => {
                return fail(format!(
                    "--pipeline is HTTP/1.1's; with {} use --streams (-m)",
                    self.protocol.flag()
                ))
            }
            Protocol::Http3 if self.target.scheme != Scheme::Https => {
                return fail(
                    "--h3 needs an https:// URL: HTTP/3 runs over QUIC, which is always TLS".into(),
                )
            }
            Protocol::Http2 | Protocol::Http3 => self.check_h2_headers()?,
            Protocol::Http1 => {}
        }
        if self.total_requests == Some(0) {
            return fail("--requests must be at least 1".into());
        }
        if self.total_requests.is_none() && self.duration.is_zero() {
            return fail("--duration must be longer than 0".into());
        }
        if self.timeout.is_zero() {
            return fail("--timeout must be longer than 0".into());
        }
        for (flag, value) in [
            ("--duration", self.duration),
            ("--timeout", self.timeout),
            ("--warmup", self.warmup),
            ("--ramp", self.ramp),
        ] {
            if value > MAX_DURATION {
                return fail(format!("{flag} must be at most a year, got {value:?}"));
            }
        }
        if self.total_requests.is_some() && !self.warmup.is_zero() {
            return fail("--warmup goes with a timed run (-d), not with --requests".into());
        }
        if let Some(rate) = self.rate {
            if !rate.is_finite() || rate <= 0.0 {
                return fail(format!(
                    "--rate must be a positive number of requests per second, got {rate}"
                ));
            }
            let interval = self.connections as f64 / rate;
            if !(1e-9..=MAX_DURATION.as_secs_f64()).contains(&interval) {
                return fail(format!(
                    "--rate {rate} over {} connections is out of range (one request per connection every 1 ns to 1 year)",
                    self.connections
                ));
            }
        }
        self.check_users()?;
        self.check_stages()?;
        if self.requests.is_empty() {
            return fail("no request to send".into());
        }
        self.check_limits()
    }

    /// This process's connections (users): its shard's part of `connections`.
    pub fn connections(&self) -> usize {
        self.shard.share(self.connections as u64) as usize
    }

    /// This process's requests with `-n`: its shard's part of `total_requests`.
    pub fn total_requests(&self) -> Option<u64> {
        self.total_requests.map(|total| self.shard.share(total))
    }

    /// This process's rate in the open model: its connections' part of `rate`.
    pub fn rate(&self) -> Option<f64> {
        self.rate
            .map(|rate| rate * self.connections() as f64 / self.connections as f64)
    }

    /// Each shard needs a connection and, with `-n`, a request.
    fn check_shard(&self) -> Result<(), ConfigError> {
        let Shard { index, count } = self.shard;
        if index >= count {
            return Err(ConfigError(format!(
                "shard {index}/{count}: the index must be below the count"
            )));
        }
        let count = u64::from(count);
        if count > 1 && (self.connections as u64) < count {
            return Err(ConfigError(format!(
                "--connections ({}) must be at least the number of shards ({count}): \
                 -c and -u count the whole test's connections",
                self.connections
            )));
        }
        if count > 1 && self.total_requests.is_some_and(|n| n < count) {
            return Err(ConfigError(format!(
                "--requests ({}) must be at least the number of shards ({count}): \
                 -n counts the whole test's requests",
                self.total_requests.unwrap_or(0)
            )));
        }
        Ok(())
    }

    /// The users model (`--think`, `--ramp`): the closed model with one
    /// request in flight per user.
    fn check_users(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if self.rate.is_some() && !self.ramp.is_zero() {
            return fail(
                "--ramp goes with the closed model (users), not with --rate: \
                 the open model keeps its own timetable"
                    .into(),
            );
        }
        let Some(think) = self.think else {
            return Ok(());
        };
        if think.min > think.max {
            return fail(format!(
                "--think: the minimum ({:?}) must not exceed the maximum ({:?})",
                think.min, think.max
            ));
        }
        if think.max > MAX_DURATION {
            return fail(format!(
                "--think must be at most a year, got {:?}",
                think.max
            ));
        }
        if self.rate.is_some() {
            return fail(
                "--think goes with the closed model (users), not with --rate: \
                 the open model sends on its own timetable"
                    .into(),
            );
        }
        if self.pipeline > 1 {
            return fail(
                "--think: a user has one request in flight, so --pipeline must be 1".into(),
            );
        }
        if self.protocol != Protocol::Http1 && self.streams > 1 {
            return fail(
                "--think: a user has one request in flight, so --streams must be 1".into(),
            );
        }
        Ok(())
    }

    /// HTTP/2 and HTTP/3 have no connection-specific headers, and `TE`
    /// may only say `trailers` (RFC 9113 8.2.2, RFC 9114 4.2).
    fn check_h2_headers(&self) -> Result<(), ConfigError> {
        let each = self.requests.iter().flat_map(|spec| &spec.headers);
        for (name, value) in self.headers.iter().chain(each) {
            let forbidden = CONNECTION_SPECIFIC.contains(&name.as_str())
                || (name == http::header::TE && value != "trailers");
            if forbidden {
                return Err(ConfigError(format!(
                    "header `{name}` is not allowed in {} ({})",
                    self.protocol,
                    self.protocol.flag()
                )));
            }
        }
        Ok(())
    }
}

/// The longest `--test-id`.
const MAX_TEST_ID: usize = 128;

/// Checks a `--test-id`: printable, no spaces, at most 128 bytes.
pub(crate) fn check_test_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_TEST_ID || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--test-id `{id}`: 1 to {MAX_TEST_ID} printable characters without spaces"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
