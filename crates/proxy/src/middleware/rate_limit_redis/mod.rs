//! `rate_limit` with `store: redis`: the same GCRA as the local limiter,
//! computed in Redis by one Lua script call per decision, so that every
//! proxy using that Redis shares one count per key (docs/MIDDLEWARE.md,
//! "rate_limit on Redis").
//!
//! - Clock: Redis's own (`TIME` inside the script), so that proxies whose
//!   clocks differ still agree.
//! - Connections: one multiplexed connection per worker, made on its
//!   first request there (its driver then runs on that worker's runtime)
//!   and again when it breaks (`link`). Requests are pipelined on it: no
//!   connection, and no lock, per request (a load from the worker's slot
//!   and a clone of the connection's handle).
//! - Budget: a request waits at most `redis.timeout` for the decision.
//!   Past it, or on an error, `on_failure` decides (`fail_open` lets it
//!   through, `fail_closed` answers 503). An error, or three timeouts in a
//!   row, mark Redis down: then requests take `on_failure` at once, and
//!   one request every [`PROBE_EVERY`] asks Redis again; its first answer
//!   marks it up. Each change is logged once, with its cause (`Cause`: a
//!   wrong password is "authentication failed" from its first failure,
//!   not a timeout), and counted in `/metrics`.

mod counts;
mod link;
#[cfg(test)]
mod tests;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use http::{HeaderValue, StatusCode};
use redis::{AsyncConnectionConfig, ErrorKind, RedisError};
use tracing::{info, warn};

use counts::StoreCounts;
use link::{Got, Links};

use super::{
    rate_policy::{interval_and_burst, key_of, too_many, KeyOf},
    Answer, Exchange, Flow, Handler, RequestView, StatsSections,
};
use crate::config::{OnFailure, RateKey as Key, RateLimitSettings, RedisStoreSettings};
use crate::telemetry::Exposition;

/// GCRA (the generic cell rate algorithm): the key holds the theoretical
/// arrival time (TAT, µs on Redis's clock) of the next request at the
/// rate. A request is allowed when the new TAT is at most `tolerance`
/// ahead of now (burst × interval); the key expires when the bucket would
/// be full again. Returns {allowed, µs to wait, requests left}.
/// (`replicate_commands`: Redis 3.2-4 need it to write after `TIME`; from
/// 5 it is the default and the call does nothing.)
const GCRA: &str = r"
redis.replicate_commands()
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local next_tat = tat + interval
local ahead = next_tat - now
if ahead > tolerance then
  return {0, ahead - tolerance, 0}
end
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil(ahead / 1000))
return {1, 0, math.floor((tolerance - ahead) / interval)}
";

/// While Redis is down, how often one request asks it again.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(250);
/// Timeouts in a row that mark Redis down.
const TIMEOUTS_DOWN: u32 = 3;
/// Longer keys (a header or claim value) are counted under their SHA-256.
const MAX_KEY: usize = 64;

#[derive(Debug)]
pub(crate) struct RedisLimiter {
    key: Key,
    shared: Arc<Shared>,
}

/// Why Redis gave no decision, as the log names it: the fix differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Cause {
    /// No answer within `redis.timeout`.
    Timeout,
    /// No connection, or it broke (I/O).
    Unavailable,
    /// A wrong or missing password: AUTH refused (WRONGPASS), NOAUTH.
    Authentication,
    /// NOPERM: the ACL user may not run the script.
    Permission,
    /// Not Redis's protocol (not a Redis server, TLS missing or extra).
    Protocol,
    /// Any other error Redis answered with (OOM, READONLY, a script error).
    Refused,
}

impl Cause {
    fn of(err: &RedisError) -> Self {
        match err.code() {
            Some("NOAUTH" | "WRONGPASS") => return Self::Authentication,
            Some("NOPERM") => return Self::Permission,
            _ => {}
        }
        match err.kind() {
            ErrorKind::AuthenticationFailed => Self::Authentication,
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType | ErrorKind::RESP3NotSupported => {
                Self::Protocol
            }
            ErrorKind::Io => Self::Unavailable,
            _ => Self::Refused,
        }
    }

    /// A fault of the configuration (of the proxy or of Redis), which
    /// waiting does not mend: logged even when Redis is down already.
    fn is_fault(self) -> bool {
        !matches!(self, Self::Timeout | Self::Unavailable)
    }

    /// What the log says, and until when `on_failure` decides.
    fn says(self) -> (&'static str, &'static str) {
        match self {
            Self::Timeout | Self::Unavailable => ("Redis does not answer", "it does"),
            Self::Authentication => (
                "Redis authentication failed (the password in redis.url or redis.password_file, or the ACL user)",
                "it succeeds",
            ),
            Self::Permission => (
                "Redis denied the call (NOPERM: the ACL user needs EVALSHA, SCRIPT LOAD, GET and SET on the prefix)",
                "it allows it",
            ),
            Self::Protocol => (
                "Redis protocol error (is redis.url a Redis server? rediss:// for TLS)",
                "Redis answers",
            ),
            Self::Refused => ("Redis refused the call", "it answers"),
        }
    }
}

/// What a decision's future needs.
#[derive(Debug)]
struct Shared {
    name: String,
    prefix: String,
    script: redis::Script,
    interval_us: u64,
    tolerance_us: u64,
    limit: HeaderValue,
    timeout: Duration,
    on_failure: OnFailure,
    links: Arc<Links>,
    up: AtomicBool,
    /// The `Cause` last logged.
    logged: AtomicU8,
    timeouts_in_a_row: AtomicU32,
    /// While down: when (ms since `epoch`) the next probe may go.
    next_probe: AtomicU64,
    epoch: Instant,
    allowed: AtomicU64,
    limited: AtomicU64,
    errors: AtomicU64,
    fallbacks: AtomicU64,
}

impl RedisLimiter {
    /// A limiter with a connection slot for each of `workers`.
    pub(super) fn new(
        config: &RateLimitSettings,
        redis: &RedisStoreSettings,
        name: &str,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let (interval, burst) = interval_and_burst(config)?;
        let interval_us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        if interval_us == 0 {
            bail!("the rate is too high for Redis's microsecond clock (at most 1,000,000/s)");
        }
        if redis.timeout.is_zero() {
            bail!("redis.timeout: 0 would decide every request by on_failure; give a budget such as 5ms");
        }
        let client = client(redis)?;
        let connections = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)));
        let shared = Shared {
            name: name.to_string(),
            prefix: redis
                .prefix
                .clone()
                .unwrap_or_else(|| format!("sluice:rate:{name}:")),
            script: redis::Script::new(GCRA),
            interval_us,
            tolerance_us: interval_us.saturating_mul(u64::from(burst)),
            limit: HeaderValue::from(config.rate.count.get()),
            timeout: redis.timeout,
            on_failure: redis.on_failure,
            links: Arc::new(Links::new(client, connections, workers)),
            up: AtomicBool::new(true),
            logged: AtomicU8::new(Cause::Timeout as u8),
            timeouts_in_a_row: AtomicU32::new(0),
            next_probe: AtomicU64::new(0),
            epoch: Instant::now(),
            allowed: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        };
        Ok(Self {
            key: config.key.0.clone(),
            shared: Arc::new(shared),
        })
    }
}

/// The client for `redis`: its URL, with the password from its file and
/// the CA from its file when given. Errors never repeat the URL (it may
/// hold a password).
fn client(redis: &RedisStoreSettings) -> anyhow::Result<redis::Client> {
    use redis::IntoConnectionInfo as _;
    let mut info = redis
        .url
        .expose()
        .into_connection_info()
        .map_err(|err| anyhow::anyhow!("redis.url: not a Redis URL ({:?})", err.kind()))?;
    if let Some(file) = &redis.password_file {
        let password = std::fs::read_to_string(file)
            .with_context(|| format!("redis.password_file: cannot read {file}"))?;
        let settings = info
            .redis_settings()
            .clone()
            .set_password(password.trim_end_matches(['\r', '\n']));
        info = info.set_redis_settings(settings);
    }
    let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    match &redis.ca_file {
        Some(_) if !tls => bail!("redis.ca_file is for `rediss://` URLs"),
        Some(file) => {
            let pem = std::fs::read(file)
                .with_context(|| format!("redis.ca_file: cannot read {file}"))?;
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            };
            redis::Client::build_with_tls(info, certificates)
                .map_err(|err| anyhow::anyhow!("redis.ca_file: {:?}", err.kind()))
        }
        None => {
            redis::Client::open(info).map_err(|err| anyhow::anyhow!("redis.url: {:?}", err.kind()))
        }
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// While Redis is down, whether this request is the one that asks it
    /// again (one per [`PROBE_EVERY`] across the workers).
    fn may_ask(&self) -> bool {
        if self.up.load(Relaxed) {
            return true;
        }
        let now = self.now_ms();
        let due = self.next_probe.load(Relaxed);
        now >= due
            && self
                .next_probe
                .compare_exchange(due, now + millis(PROBE_EVERY), Relaxed, Relaxed)
                .is_ok()
    }

    fn answered(&self) {
        self.timeouts_in_a_row.store(0, Relaxed);
        if !self.up.swap(true, Relaxed) {
            info!(middleware = %self.name, "rate_limit: Redis answers again; it decides again");
        }
    }

    /// A call that gave no decision. An error, or [`TIMEOUTS_DOWN`]
    /// timeouts in a row, mark Redis down; that is logged once with its
    /// cause, and so is a fault found while down (a wrong password seen
    /// after timeouts), so that the log names what an operator must fix.
    fn failed(&self, cause: Cause, why: &dyn std::fmt::Display) {
        self.errors.fetch_add(1, Relaxed);
        let down = cause != Cause::Timeout
            || self.timeouts_in_a_row.fetch_add(1, Relaxed) + 1 >= TIMEOUTS_DOWN;
        if !down {
            return;
        }
        let went_down = self.up.swap(false, Relaxed);
        if went_down {
            self.next_probe
                .store(self.now_ms() + millis(PROBE_EVERY), Relaxed);
        }
        let news = cause.is_fault() && self.logged.load(Relaxed) != cause as u8;
        if went_down || news {
            self.logged.store(cause as u8, Relaxed);
            let (what, until) = cause.says();
            warn!(
                middleware = %self.name,
                error = %why,
                on_failure = ?self.on_failure,
                "rate_limit: {what}; requests are decided by on_failure until {until}"
            );
        }
    }

    /// The decision when Redis gave none.
    fn fallback(&self) -> Flow {
        self.fallbacks.fetch_add(1, Relaxed);
        match self.on_failure {
            OnFailure::FailOpen => Flow::Next,
            OnFailure::FailClosed => Flow::Answer(Answer::problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "the rate limit cannot be checked",
            )),
        }
    }

    /// The Redis key for a request's key.
    fn key(&self, key: KeyOf) -> String {
        let text = match key {
            KeyOf::Ip(ip) => ip.to_string(),
            KeyOf::Text(text) if text.len() <= MAX_KEY => text,
            KeyOf::Text(text) => {
                let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
                digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
            }
        };
        let mut key = String::with_capacity(self.prefix.len() + text.len());
        key.push_str(&self.prefix);
        key.push_str(&text);
        key
    }

    /// The script's wait, at most what the GCRA can ask (one interval
    /// past the tolerance): a negative one arrives wrapped to ~2^64 µs.
    fn retry_wait(&self, wait_us: u64) -> Duration {
        Duration::from_micros(wait_us.min(self.interval_us))
    }

    /// The decision for `key`, on the worker's connection (`ready`, or
    /// one made or waited for within the budget).
    async fn decide(self: Arc<Self>, worker: usize, key: String, ready: Option<Got>) -> Flow {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let got = match ready {
            Some(got) => got,
            None => {
                let shared = Arc::clone(&self);
                let failed = move |err: &RedisError| shared.failed(Cause::of(err), err);
                self.links.get(worker, deadline, failed).await
            }
        };
        let (mut connection, generation) = match got {
            Got::Ready {
                connection,
                generation,
            } => (connection, generation),
            // The attempt's task counted and logged its failure.
            Got::Failed => return self.fallback(),
            Got::TimedOut => {
                self.failed(Cause::Timeout, &NO_ANSWER);
                return self.fallback();
            }
        };
        let mut call = self.script.key(key);
        call.arg(self.interval_us).arg(self.tolerance_us);
        let asked = tokio::time::timeout_at(
            deadline,
            call.invoke_async::<(u8, u64, u64)>(&mut connection),
        )
        .await;
        match asked {
            Ok(Ok((allowed, wait_us, _left))) => {
                self.answered();
                if allowed == 1 {
                    self.allowed.fetch_add(1, Relaxed);
                    Flow::Next
                } else {
                    self.limited.fetch_add(1, Relaxed);
                    too_many(&self.limit, self.retry_wait(wait_us))
                }
            }
            Ok(Err(err)) => {
                if err.is_unrecoverable_error() {
                    self.links.forget(worker, generation);
                }
                self.failed(Cause::of(&err), &err);
                self.fallback()
            }
            Err(_) => {
                self.failed(Cause::Timeout, &NO_ANSWER);
                self.fallback()
            }
        }
    }
}

/// The error of a call past `redis.timeout`, in the log.
const NO_ANSWER: &str = "no answer within redis.timeout";

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Handler for RedisLimiter {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let shared = &self.shared;
        if !shared.may_ask() {
            return shared.fallback();
        }
        let key = shared.key(key_of(&self.key, request, exchange));
        let ready = shared.links.ready(exchange.worker);
        Flow::Wait(Box::pin(Arc::clone(shared).decide(
            exchange.worker,
            key,
            ready,
        )))
    }

    fn render_metrics(&self, name: &str, out: &mut Exposition) {
        self.counts().render(name, out);
    }

    fn stats(&self, name: &str, sections: &mut StatsSections) {
        self.counts().stats(name, sections);
    }
}

impl RedisLimiter {
    fn counts(&self) -> StoreCounts {
        let shared = &self.shared;
        StoreCounts {
            up: shared.up.load(Relaxed),
            allowed: shared.allowed.load(Relaxed),
            limited: shared.limited.load(Relaxed),
            errors: shared.errors.load(Relaxed),
            fallbacks: shared.fallbacks.load(Relaxed),
        }
    }
}
