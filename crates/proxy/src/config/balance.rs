//! The load-balancing keys of an upstream (docs/LOAD-BALANCING.md):
//! weighted hosts, the policy and its hash key, persistence, active
//! health checks, slow start, retries and per-host limits.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

use super::{
    secret::Secret,
    units::{duration, human},
};

/// One host: `http://HOST:PORT`, or `{ url, weight }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSettings {
    pub url: String,
    /// Relative share of the traffic, 1 to 1000; default 1.
    pub weight: u32,
}

/// The largest weight a host may have (keeps the round-robin cycle and
/// the hash ring small).
pub const MAX_WEIGHT: u32 = 1000;

impl<'de> Deserialize<'de> for HostSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Weighted {
            url: String,
            #[serde(default = "one")]
            weight: u32,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Url(String),
            Weighted(Weighted),
        }
        let entry = match Raw::deserialize(deserializer).map_err(|_| {
            D::Error::custom("a host is a URL string or `{ url, weight }` (weight 1 to 1000)")
        })? {
            Raw::Url(url) => Self { url, weight: 1 },
            Raw::Weighted(w) => Self {
                url: w.url,
                weight: w.weight,
            },
        };
        if entry.weight == 0 || entry.weight > MAX_WEIGHT {
            return Err(D::Error::custom(format!(
                "weight {} is out of range: 1 to {MAX_WEIGHT}",
                entry.weight
            )));
        }
        Ok(entry)
    }
}

/// Always `{ url, weight }`, whichever way it was written.
impl Serialize for HostSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut host = serializer.serialize_struct("HostSettings", 2)?;
        host.serialize_field("url", &self.url)?;
        host.serialize_field("weight", &self.weight)?;
        host.end()
    }
}

fn one() -> u32 {
    1
}

/// How a host is chosen for a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Smooth weighted round robin (plain round robin when weights are equal).
    #[default]
    RoundRobin,
    /// A random host, in proportion to the weights.
    Random,
    /// The fewer in-flight requests of two random hosts (P2C).
    LeastRequest,
    /// The lower peak-EWMA latency × in-flight of two random hosts.
    LeastTime,
    /// Consistent hashing of a request key (`hash.key`).
    Hash,
}

/// `hash:` what consistent hashing hashes, and the optional bound on load.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashSettings {
    pub key: HashKey,
    /// Hosts take at most this factor of the average in-flight load (≥ 1.0);
    /// a key whose host is fuller goes to the next host on the ring.
    #[serde(default)]
    pub bounded_load: Option<f64>,
}

/// The request key a `hash` balancer hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    ClientIp,
    /// Lower case.
    Header(String),
    Cookie(String),
    Query(String),
    Path,
}

impl<'de> Deserialize<'de> for HashKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let named = |prefix: &str| {
            text.strip_prefix(prefix)
                .filter(|name| !name.is_empty())
                .map(str::to_string)
        };
        match text.as_str() {
            "client_ip" => Ok(Self::ClientIp),
            "path" => Ok(Self::Path),
            _ => {
                if let Some(name) = named("header:") {
                    Ok(Self::Header(name.to_ascii_lowercase()))
                } else if let Some(name) = named("cookie:") {
                    Ok(Self::Cookie(name))
                } else if let Some(name) = named("query:") {
                    Ok(Self::Query(name))
                } else {
                    Err(D::Error::custom(format!(
                        "unknown hash key `{text}`; use client_ip, path, header:NAME, cookie:NAME or query:NAME"
                    )))
                }
            }
        }
    }
}

/// As it is written: `client_ip`, `header:NAME`, ...
impl Serialize for HashKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::ClientIp => serializer.serialize_str("client_ip"),
            Self::Path => serializer.serialize_str("path"),
            Self::Header(name) => serializer.collect_str(&format_args!("header:{name}")),
            Self::Cookie(name) => serializer.collect_str(&format_args!("cookie:{name}")),
            Self::Query(name) => serializer.collect_str(&format_args!("query:{name}")),
        }
    }
}

/// `sticky:` session persistence; exactly one of `cookie` and `app_cookie`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StickySettings {
    /// The proxy inserts this cookie, naming the chosen host, HMAC-signed.
    #[serde(default)]
    pub cookie: Option<String>,
    /// The application sets this cookie; the proxy learns which host set each value.
    #[serde(default)]
    pub app_cookie: Option<String>,
    /// The HMAC key for `cookie` (use `${VAR}`); default: random at start,
    /// so cookies do not outlive the process.
    #[serde(default)]
    pub key: Option<Secret>,
}

/// `health.active:` HTTP checks of each host, once per process.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ActiveHealthSettings {
    pub path: String,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub interval: Duration,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub timeout: Duration,
    /// Statuses that pass: codes and `LOW..HIGH` ranges (inclusive).
    pub expect: Vec<StatusRange>,
    /// Passes in a row that bring a host back.
    pub rise: u32,
    /// Failures in a row that take a host out.
    pub fall: u32,
}

impl Default for ActiveHealthSettings {
    fn default() -> Self {
        Self {
            path: "/".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            expect: vec![StatusRange(200, 299)],
            rise: 2,
            fall: 3,
        }
    }
}

/// An inclusive range of status codes: `200`, or `"200..299"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRange(pub u16, pub u16);

impl StatusRange {
    pub fn contains(self, status: u16) -> bool {
        (self.0..=self.1).contains(&status)
    }
}

impl<'de> Deserialize<'de> for StatusRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = match Code::deserialize(deserializer)? {
            Code::Number(n) => n.to_string(),
            Code::Text(text) => text,
        };
        let status = |s: &str| {
            s.trim()
                .parse::<u16>()
                .ok()
                .filter(|n| (100..600).contains(n))
        };
        let range = match text.split_once("..") {
            Some((low, high)) => status(low).zip(status(high)),
            None => status(&text).map(|n| (n, n)),
        };
        match range {
            Some((low, high)) if low <= high => Ok(Self(low, high)),
            _ => Err(D::Error::custom(format!(
                "`{text}` is not a status (100-599) or a range like 200..299"
            ))),
        }
    }
}

/// `200`, or `"200..299"`, as it was written.
impl Serialize for StatusRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 == self.1 {
            serializer.serialize_u16(self.0)
        } else {
            serializer.collect_str(&format_args!("{}..{}", self.0, self.1))
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Code {
    Number(u16),
    Text(String),
}

/// What a request may be retried on (`retry_on:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOn {
    /// The connection could not be opened (any request: nothing was sent).
    ConnectFailure,
    /// The upstream closed or reset the connection before any byte of an answer.
    Reset,
    /// The upstream answered with this status (500-599).
    Status(u16),
}

impl<'de> Deserialize<'de> for RetryOn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Code::deserialize(deserializer)? {
            Code::Text(t) if t == "connect_failure" => Ok(Self::ConnectFailure),
            Code::Text(t) if t == "reset" => Ok(Self::Reset),
            Code::Number(n) if (500..600).contains(&n) => Ok(Self::Status(n)),
            Code::Text(t) => match t.parse::<u16>() {
                Ok(n) if (500..600).contains(&n) => Ok(Self::Status(n)),
                _ => Err(D::Error::custom(format!(
                    "`{t}`: retry_on takes connect_failure, reset and statuses 500-599"
                ))),
            },
            Code::Number(n) => Err(D::Error::custom(format!(
                "{n}: retry_on takes statuses 500-599"
            ))),
        }
    }
}

impl Serialize for RetryOn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::ConnectFailure => serializer.serialize_str("connect_failure"),
            Self::Reset => serializer.serialize_str("reset"),
            Self::Status(status) => serializer.serialize_u16(*status),
        }
    }
}

pub(super) fn default_retry_on() -> Vec<RetryOn> {
    vec![RetryOn::ConnectFailure]
}

pub(super) fn default_retry_backoff() -> Duration {
    Duration::from_millis(25)
}

/// Passive health: a host failing `failures` times in a row (connect
/// failures, resets, timeouts, 5xx answers) is ejected for `backoff`, as
/// long as no more than `max_ejected_percent` of the hosts are out;
/// active health: `active` checks. Below `panic_threshold` percent of the
/// hosts in, health is ignored and every host takes traffic.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSettings {
    pub failures: u32,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub backoff: Duration,
    pub max_ejected_percent: u32,
    #[serde(deserialize_with = "percent")]
    #[schemars(range(max = 100))]
    pub panic_threshold: u32,
    pub active: Option<ActiveHealthSettings>,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            failures: 3,
            backoff: Duration::from_secs(10),
            max_ejected_percent: 50,
            panic_threshold: 50,
            active: None,
        }
    }
}

/// Connections opened to one host at once (`max_connecting`). A connect
/// keeps its slot until its request's task runs again, a whole turn of
/// the worker's run queue (300 ms with ten thousand busy clients), so the
/// limit bounds how fast a pool can grow: at 32, the pools behind 9,936
/// clients took about 20 s to grow and the tail paid for it (p99 526 ms
/// against HAProxy's 364); at 256, 342 ms (docs/PERFORMANCE.md, issue
/// 52). Past a small accept queue (Tomcat's holds 100) the extra SYNs are
/// dropped, and a connect held up by one is served by a connection given
/// back instead (`upstream::queue`): 5,000 users bursting onto one Tomcat
/// got no failure either way (bench/spring-saturated.sh).
pub(super) fn default_max_connecting() -> u32 {
    256
}

/// An integer of at least 1.
pub(super) fn at_least_one<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    match u32::deserialize(deserializer)? {
        0 => Err(D::Error::custom("must be at least 1")),
        n => Ok(n),
    }
}

/// A share of the hosts, 0 to 100.
fn percent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    match u32::deserialize(deserializer)? {
        n @ 0..=100 => Ok(n),
        n => Err(D::Error::custom(format!(
            "{n} is not a percentage: 0 to 100"
        ))),
    }
}

/// `retry_budget:` retries allowed on top of the requests, so that a
/// failing upstream does not get every request several times.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryBudgetSettings {
    /// Retries as a share of the requests of the last second, 0 to 100.
    pub percent: u32,
    /// Retries allowed each second whatever the share.
    pub min_per_second: u32,
}

impl Default for RetryBudgetSettings {
    fn default() -> Self {
        Self {
            percent: 20,
            min_per_second: 3,
        }
    }
}
