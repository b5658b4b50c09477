//! What a `rate_limit` decides with, whichever its store (the process,
//! rate_limit.rs; Redis, rate_limit_redis/): the GCRA's interval and
//! burst from the settings, the key a request is counted under, and the
//! 429 past the rate.

use std::{net::IpAddr, time::Duration};

use anyhow::bail;
use http::{HeaderName, HeaderValue, StatusCode};

use super::{Answer, Exchange, Flow, RequestView};
use crate::config::{RateKey as Key, RateLimitSettings};

/// One request's share of the period (the GCRA's emission interval),
/// and how many may come at once.
pub(super) fn interval_and_burst(config: &RateLimitSettings) -> anyhow::Result<(Duration, u32)> {
    let rate = *config.rate;
    let interval = rate.per / rate.count.get();
    if interval.is_zero() {
        bail!("the rate is too high");
    }
    Ok((interval, config.burst.unwrap_or(rate.count).get()))
}

/// The key a request is counted under.
pub(super) enum KeyOf {
    Ip(IpAddr),
    Text(String),
}

pub(super) fn key_of(key: &Key, request: &RequestView<'_>, exchange: &Exchange) -> KeyOf {
    match key {
        Key::ClientIp => KeyOf::Ip(request.client_ip),
        Key::Header(name) => {
            let value = request.header(name.as_str()).unwrap_or_default();
            KeyOf::Text(String::from_utf8_lossy(value).into_owned())
        }
        Key::Claim(claim) => KeyOf::Text(
            exchange
                .claims
                .as_ref()
                .and_then(|verified| verified.claims.get(claim))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .unwrap_or_default(),
        ),
    }
}

/// 429, with when to come back in whole seconds (rounded up).
pub(super) fn too_many(limit: &HeaderValue, wait: Duration) -> Flow {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Flow::Answer(
        Answer::problem(
            StatusCode::TOO_MANY_REQUESTS,
            format!("rate limit exceeded; retry in {seconds} s"),
        )
        .with_header(http::header::RETRY_AFTER, HeaderValue::from(seconds))
        .with_header(HeaderName::from_static("ratelimit-limit"), limit.clone())
        .with_header(
            HeaderName::from_static("ratelimit-remaining"),
            HeaderValue::from_static("0"),
        )
        .with_header(
            HeaderName::from_static("ratelimit-reset"),
            HeaderValue::from(seconds),
        ),
    )
}
