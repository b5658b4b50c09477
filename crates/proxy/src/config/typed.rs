//! Handler settings whose text has a grammar of its own (rates, keys,
//! networks), parsed here so that validation and the handlers agree on it
//! and the handlers never parse text again.

use std::{net::IpAddr, num::NonZeroU32, time::Duration};

use anyhow::{bail, Context};
use http::HeaderName;
use ipnet::IpNet;

/// What a rate limit counts by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateKey {
    ClientIp,
    Header(HeaderName),
    Claim(String),
}

/// `100/s`, `6000/m`, `1/h`.
pub fn parse_rate(text: &str) -> anyhow::Result<(NonZeroU32, Duration)> {
    let (count, unit) = text
        .split_once('/')
        .with_context(|| format!("`{text}` is not a rate like 100/s"))?;
    let count: NonZeroU32 = count
        .trim()
        .parse()
        .with_context(|| format!("`{text}`: the count must be a whole number above 0"))?;
    let per = match unit.trim() {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        other => bail!("`{text}`: the unit must be s, m or h, not `{other}`"),
    };
    Ok((count, per))
}

/// `client_ip`, `header:NAME` or `claim:NAME`.
pub fn parse_rate_key(text: &str) -> anyhow::Result<RateKey> {
    Ok(match text.split_once(':') {
        None if text == "client_ip" => RateKey::ClientIp,
        Some(("header", name)) => RateKey::Header(header_name(name)?),
        Some(("claim", name)) if !name.is_empty() => RateKey::Claim(name.to_string()),
        _ => bail!("`{text}` is not a key: use client_ip, header:NAME or claim:NAME"),
    })
}

/// `10.0.0.0/8`, `::1/128`, or a single address.
pub fn parse_net(text: &str) -> anyhow::Result<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .with_context(|| format!("`{text}` is not a network (10.0.0.0/8) or an address"))
}

/// A header name as written in the configuration, lower-cased.
pub fn header_name(name: &str) -> anyhow::Result<HeaderName> {
    HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes())
        .with_context(|| format!("`{name}` is not a valid header name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_keys_parse() {
        assert_eq!(
            parse_rate("100/s").unwrap(),
            (NonZeroU32::new(100).unwrap(), Duration::from_secs(1))
        );
        assert_eq!(parse_rate(" 6 / m ").unwrap().1, Duration::from_secs(60));
        for bad in ["0/s", "100", "10/d", "x/s", "-1/s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            parse_rate_key("client_ip").unwrap(),
            RateKey::ClientIp
        ));
        assert!(
            matches!(parse_rate_key("header:X-Api-Key").unwrap(), RateKey::Header(h) if h == "x-api-key")
        );
        assert!(matches!(parse_rate_key("claim:sub").unwrap(), RateKey::Claim(c) if c == "sub"));
        for bad in ["ip", "header:", "claim:", "header:bad name"] {
            assert!(parse_rate_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_networks_are_errors() {
        for bad in ["10.0.0.0/33", "300.1.1.1", "", "10.0.0.0/8/1", "::1/129"] {
            assert!(parse_net(bad).is_err(), "{bad}");
        }
    }
}
