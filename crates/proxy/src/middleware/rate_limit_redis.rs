//! `rate_limit` with `store: redis`: the same GCRA as the local limiter,
//! computed in Redis by one Lua script call per decision, so that every
//! proxy using that Redis shares one count per key (docs/MIDDLEWARE.md,
//! "rate_limit on Redis").
//!
//! - Clock: Redis's own (`TIME` inside the script), so that proxies whose
//!   clocks differ still agree.
//! - Connections: one multiplexed connection per worker thread, made on
//!   its first request there (its driver then runs on that worker's
//!   runtime), reconnected with backoff by the `redis` crate's
//!   `ConnectionManager`. Requests are pipelined on it: no connection,
//!   and no lock held, per request.
//! - Budget: a request waits at most `redis.timeout` for the decision.
//!   Past it, or on an error, `on_failure` decides (`fail_open` lets it
//!   through, `fail_closed` answers 503). An error, or three timeouts in a
//!   row, mark Redis down: then requests take `on_failure` at once, and
//!   one request every [`PROBE_EVERY`] asks Redis again; its first answer
//!   marks it up. Each change is logged once, and counted in `/metrics`.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed},
        Arc, Mutex, PoisonError,
    },
    thread::ThreadId,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use http::{HeaderValue, StatusCode};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tracing::{info, warn};

use super::{
    rate_limit::{interval_and_burst, key_of, too_many, KeyOf},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::{OnFailure, RateKey as Key, RateLimitSettings, RedisStoreSettings};

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

/// What `/metrics` shows of a limiter on Redis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StoreCounts {
    pub up: bool,
    /// Decisions Redis made: allowed, limited.
    pub allowed: u64,
    pub limited: u64,
    /// Calls that failed or ran past the budget.
    pub errors: u64,
    /// Requests that `on_failure` decided.
    pub fallbacks: u64,
}

#[derive(Debug)]
pub(crate) struct RedisLimiter {
    key: Key,
    shared: Arc<Shared>,
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// One connection per worker thread.
    connections: Mutex<Vec<(ThreadId, ConnectionManager)>>,
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
    up: AtomicBool,
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
    pub(super) fn new(
        config: &RateLimitSettings,
        redis: &RedisStoreSettings,
        name: &str,
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
            up: AtomicBool::new(true),
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
            client,
            config: ConnectionManagerConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(1)))
                .set_response_timeout(Some(Duration::from_secs(1)))
                .set_max_delay(Duration::from_secs(2)),
            connections: Mutex::new(Vec::new()),
        })
    }

    /// This worker's connection, made on its first request.
    fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        let thread = std::thread::current().id();
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, connection)) = connections.iter().find(|(t, _)| *t == thread) {
            return Ok(connection.clone());
        }
        let connection =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())?;
        connections.push((thread, connection.clone()));
        Ok(connection)
    }
}

/// The client for `redis`: its URL, with the password from its file and
/// the CA from its file when given. Errors never repeat the URL (it may
/// hold a password).
fn client(redis: &RedisStoreSettings) -> anyhow::Result<redis::Client> {
    use redis::IntoConnectionInfo as _;
    let mut info = redis
        .url
        .as_str()
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

    fn failed(&self, why: &dyn std::fmt::Display, timed_out: bool) {
        self.errors.fetch_add(1, Relaxed);
        let down = !timed_out || self.timeouts_in_a_row.fetch_add(1, Relaxed) + 1 >= TIMEOUTS_DOWN;
        if down && self.up.swap(false, Relaxed) {
            self.next_probe
                .store(self.now_ms() + millis(PROBE_EVERY), Relaxed);
            warn!(
                middleware = %self.name,
                error = %why,
                on_failure = ?self.on_failure,
                "rate_limit: Redis does not answer; requests are decided by on_failure until it does"
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

    async fn decide(self: Arc<Self>, key: String, mut connection: ConnectionManager) -> Flow {
        let mut call = self.script.key(key);
        call.arg(self.interval_us).arg(self.tolerance_us);
        let asked = tokio::time::timeout(
            self.timeout,
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
                    too_many(&self.limit, Duration::from_micros(wait_us))
                }
            }
            Ok(Err(err)) => {
                self.failed(&err, false);
                self.fallback()
            }
            Err(_) => {
                self.failed(&"no answer within redis.timeout", true);
                self.fallback()
            }
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Handler for RedisLimiter {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let shared = &self.shared;
        if !shared.may_ask() {
            return shared.fallback();
        }
        let connection = match self.connection() {
            Ok(connection) => connection,
            Err(err) => {
                shared.failed(&err, false);
                return shared.fallback();
            }
        };
        let key = shared.key(key_of(&self.key, request, exchange));
        Flow::Wait(Box::pin(Arc::clone(shared).decide(key, connection)))
    }

    fn store_counts(&self) -> Option<StoreCounts> {
        let shared = &self.shared;
        Some(StoreCounts {
            up: shared.up.load(Relaxed),
            allowed: shared.allowed.load(Relaxed),
            limited: shared.limited.load(Relaxed),
            errors: shared.errors.load(Relaxed),
            fallbacks: shared.fallbacks.load(Relaxed),
        })
    }
}
