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

#[cfg(test)]
mod tests {
    use std::{num::NonZeroU32, sync::Arc};

    use super::*;
    use crate::config::{Parsed, Rate};

    fn settings(yaml: &str) -> RateLimitSettings {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn the_interval_is_the_period_shared_out_and_the_burst_a_periods_worth() {
        let per_minute = settings("rate: 3/m\n");
        assert_eq!(
            interval_and_burst(&per_minute).unwrap(),
            (Duration::from_secs(20), 3)
        );
        let with_burst = settings("rate: 10/s\nburst: 1\n");
        assert_eq!(
            interval_and_burst(&with_burst).unwrap(),
            (Duration::from_millis(100), 1)
        );
        // The parser refuses such a rate; a rate made another way is
        // refused here too rather than dividing to a zero interval.
        let mut too_fast = per_minute;
        too_fast.rate = Parsed(Rate {
            count: NonZeroU32::new(1_000).unwrap(),
            per: Duration::from_nanos(1),
        });
        let err = interval_and_burst(&too_fast).unwrap_err().to_string();
        assert!(err.contains("too high"), "{err}");
    }

    fn text(key: KeyOf) -> String {
        match key {
            KeyOf::Text(text) => text,
            KeyOf::Ip(ip) => panic!("an address, {ip}"),
        }
    }

    #[test]
    fn a_request_is_counted_under_its_address_header_or_claim() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-tenant", HeaderValue::from_static("acme"));
        headers.insert("x-raw", HeaderValue::from_bytes(b"caf\xe9").unwrap());
        let request = RequestView {
            client_ip: "192.0.2.7".parse().unwrap(),
            ..RequestView::get(&headers)
        };
        let mut exchange = Exchange::default();
        let client_ip = settings("rate: 1/s\n").key.0;
        match key_of(&client_ip, &request, &exchange) {
            KeyOf::Ip(ip) => assert_eq!(ip, request.client_ip),
            KeyOf::Text(text) => panic!("text {text}"),
        }
        let tenant = settings("rate: 1/s\nkey: header:X-Tenant\n").key.0;
        assert_eq!(text(key_of(&tenant, &request, &exchange)), "acme");
        // Bytes that are not UTF-8 still make a key (not a panic, not a
        // key shared with every other such client by being dropped).
        let raw = settings("rate: 1/s\nkey: header:x-raw\n").key.0;
        assert_eq!(text(key_of(&raw, &request, &exchange)), "caf\u{fffd}");
        // No such header, or no verified token: the empty key, shared.
        let absent = settings("rate: 1/s\nkey: header:x-absent\n").key.0;
        assert_eq!(text(key_of(&absent, &request, &exchange)), "");
        let subject = settings("rate: 1/s\nkey: claim:sub\n").key.0;
        assert_eq!(text(key_of(&subject, &request, &exchange)), "");
        let claims = serde_json::json!({"sub": "alice", "org": 42});
        exchange.claims = Some(Arc::new(jwt::Verified {
            claims: claims.as_object().unwrap().clone(),
            expires_at: None,
            not_before: None,
            algorithm: jwt::Algorithm::ES256,
            key_id: None,
        }));
        assert_eq!(text(key_of(&subject, &request, &exchange)), "alice");
        let org = settings("rate: 1/s\nkey: claim:org\n").key.0;
        assert_eq!(text(key_of(&org, &request, &exchange)), "42");
    }

    /// The status, `Retry-After` and `RateLimit-Reset` of a 429.
    fn refusal(wait: Duration) -> (u16, String, String, String) {
        let Flow::Answer(answer) = too_many(&HeaderValue::from(5), wait) else {
            panic!("no answer");
        };
        let field = |name: &str| {
            answer
                .headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        (
            answer.status.as_u16(),
            field("retry-after"),
            field("ratelimit-reset"),
            field("ratelimit-limit"),
        )
    }

    #[test]
    fn the_429_says_when_to_come_back_in_whole_seconds_rounded_up() {
        let s = |n: &str| n.to_string();
        assert_eq!(
            refusal(Duration::from_millis(1_200)),
            (429, s("2"), s("2"), s("5"))
        );
        assert_eq!(
            refusal(Duration::from_secs(3)),
            (429, s("3"), s("3"), s("5"))
        );
        // Less than a microsecond left is still a second to wait, not 0.
        assert_eq!(refusal(Duration::from_nanos(1)).1, "1");
    }
}
