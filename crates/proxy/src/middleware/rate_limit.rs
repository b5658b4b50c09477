//! `rate_limit`: GCRA per key: the client address, a request header or a
//! claim of the verified token. Past the rate and burst, 429 with
//! `Retry-After` and the IETF draft `RateLimit-*` fields. Counted in the
//! process (governor, `store: local`) or in Redis, shared by every proxy
//! that uses it (`store: redis`, rate_limit_redis/).

use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use anyhow::{bail, Context};
use governor::{
    clock::{Clock, DefaultClock},
    DefaultKeyedRateLimiter, Quota,
};
use http::HeaderValue;

use super::{
    build::{Build, Builder},
    rate_limit_redis::RedisLimiter,
    rate_policy::{interval_and_burst, key_of, too_many, KeyOf},
    Exchange, Flow, Handler, RequestView,
};
use crate::config::{RateKey as Key, RateLimitSettings, RateStore};

/// How often (in requests) the key count is checked against `max_keys`.
const SWEEP_EVERY: u64 = 4096;

#[derive(Debug)]
pub(crate) struct RateLimiter {
    key: Key,
    by_ip: DefaultKeyedRateLimiter<IpAddr>,
    by_text: DefaultKeyedRateLimiter<String>,
    limit: HeaderValue,
    max_keys: usize,
    checks: AtomicU64,
}

impl RateLimiter {
    fn new(config: &RateLimitSettings) -> anyhow::Result<Self> {
        let rate = *config.rate;
        let (interval, burst) = interval_and_burst(config)?;
        let quota = Quota::with_period(interval)
            .context("the rate is too high")?
            .allow_burst(std::num::NonZeroU32::new(burst).context("a burst of 0")?);
        Ok(Self {
            key: config.key.0.clone(),
            by_ip: DefaultKeyedRateLimiter::keyed(quota),
            by_text: DefaultKeyedRateLimiter::keyed(quota),
            limit: HeaderValue::from(rate.count.get()),
            max_keys: config.max_keys.max(1),
            checks: AtomicU64::new(0),
        })
    }

    fn sweep(&self) {
        if self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SWEEP_EVERY)
        {
            if self.by_ip.len() > self.max_keys {
                self.by_ip.retain_recent();
            }
            if self.by_text.len() > self.max_keys {
                self.by_text.retain_recent();
            }
        }
    }
}

impl Build for RateLimitSettings {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        match (self.store, &self.redis) {
            (RateStore::Local, None) => Ok(Arc::new(RateLimiter::new(self)?)),
            (RateStore::Redis, Some(redis)) => Ok(Arc::new(RedisLimiter::new(
                self,
                redis,
                &builder.name,
                builder.context.workers,
            )?)),
            (RateStore::Redis, None) => {
                bail!("`store: redis` needs a `redis` section (its `url` at least)")
            }
            (RateStore::Local, Some(_)) => {
                bail!("a `redis` section is given but `store` is `local`: add `store: redis`")
            }
        }
    }
}

impl Handler for RateLimiter {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        self.sweep();
        let checked = match key_of(&self.key, request, exchange) {
            KeyOf::Ip(ip) => self.by_ip.check_key(&ip),
            KeyOf::Text(text) => self.by_text.check_key(&text),
        };
        match checked {
            Ok(()) => Flow::Next,
            Err(not_until) => too_many(
                &self.limit,
                not_until.wait_time_from(DefaultClock::default().now()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Parsed, Rate, Setting as _};

    fn limiter(rate: &str, burst: Option<u32>) -> RateLimiter {
        RateLimiter::new(&RateLimitSettings {
            key: Parsed(Key::ClientIp),
            rate: Parsed(Rate::parse(rate).unwrap()),
            burst: burst.and_then(std::num::NonZeroU32::new),
            max_keys: 10,
            store: RateStore::Local,
            redis: None,
        })
        .unwrap()
    }

    #[test]
    fn the_burst_is_one_periods_worth_unless_set_and_keys_are_separate() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let per_minute = limiter("3/m", None);
        assert_eq!(per_minute.limit, HeaderValue::from(3));
        for _ in 0..3 {
            assert!(per_minute.by_ip.check_key(&ip).is_ok());
        }
        assert!(per_minute.by_ip.check_key(&ip).is_err());
        assert!(per_minute.by_ip.check_key(&other).is_ok());
        let one_at_a_time = limiter("3/m", Some(1));
        assert!(one_at_a_time.by_ip.check_key(&ip).is_ok());
        assert!(one_at_a_time.by_ip.check_key(&ip).is_err());
    }
}
