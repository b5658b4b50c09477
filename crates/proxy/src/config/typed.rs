//! Handler settings whose text has a grammar of its own (rates, keys,
//! networks, header names and values, methods, algorithms, URLs), parsed
//! when the file is read: a bad value fails the load with its file, line
//! and key, and the handlers get the parsed value and never parse text.

use std::{net::IpAddr, num::NonZeroU32, ops::Deref, time::Duration};

use anyhow::{bail, Context};
use http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use ipnet::IpNet;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

/// A value written as text in the configuration file.
pub trait Setting: Sized {
    /// Parses the text; the error says what is wrong with it.
    fn parse(text: &str) -> anyhow::Result<Self>;
    /// The text the admin API's `/config` shows for it.
    fn text(&self) -> String;
}

/// A [`Setting`] parsed while the file is deserialised, so that a bad
/// value is reported where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<T>(pub T);

impl<T> Deref for Parsed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Setting> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        T::parse(&text).map(Parsed).map_err(D::Error::custom)
    }
}

impl<T: Setting> Serialize for Parsed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.text().serialize(serializer)
    }
}

/// `100/s`, `6000/m`, `1/h`: `count` requests per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: NonZeroU32,
    pub per: Duration,
}

impl Setting for Rate {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let (count, per) = parse_rate(text)?;
        Ok(Self { count, per })
    }

    fn text(&self) -> String {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        format!("{}/{unit}", self.count)
    }
}

/// What a rate limit counts by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateKey {
    ClientIp,
    Header(HeaderName),
    Claim(String),
}

impl Setting for RateKey {
    fn parse(text: &str) -> anyhow::Result<Self> {
        parse_rate_key(text)
    }

    fn text(&self) -> String {
        match self {
            Self::ClientIp => "client_ip".into(),
            Self::Header(name) => format!("header:{name}"),
            Self::Claim(claim) => format!("claim:{claim}"),
        }
    }
}

/// `10.0.0.0/8`, `::1/128`, or a single address.
impl Setting for IpNet {
    fn parse(text: &str) -> anyhow::Result<Self> {
        parse_net(text)
    }

    fn text(&self) -> String {
        self.to_string()
    }
}

/// Lower-cased.
impl Setting for HeaderName {
    fn parse(text: &str) -> anyhow::Result<Self> {
        header_name(text)
    }

    fn text(&self) -> String {
        self.as_str().into()
    }
}

impl Setting for HeaderValue {
    fn parse(text: &str) -> anyhow::Result<Self> {
        HeaderValue::from_str(text)
            .with_context(|| format!("`{}` is not a valid header value", text.escape_debug()))
    }

    fn text(&self) -> String {
        // Made from a `&str`, so it is visible ASCII.
        self.to_str().unwrap_or_default().into()
    }
}

impl Setting for Method {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        match Method::from_bytes(text.as_bytes()) {
            Ok(method) if !text.is_empty() => Ok(method),
            _ => bail!("`{text}` is not an HTTP method"),
        }
    }

    fn text(&self) -> String {
        self.as_str().into()
    }
}

/// The exact JOSE name (`RS256`); `none` never parses.
impl Setting for jwt::Algorithm {
    fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(text.parse::<jwt::Algorithm>()?)
    }

    fn text(&self) -> String {
        self.as_str().into()
    }
}

/// An `http://` or `https://` URL with a host. Shown without its user
/// information and query, which may carry credentials.
impl Setting for Uri {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let uri: Uri = text
            .parse()
            .with_context(|| format!("`{text}` is not a URL"))?;
        match uri.scheme_str() {
            Some("http" | "https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
            _ => bail!("`{text}` is not an http:// or https:// URL with a host"),
        }
    }

    fn text(&self) -> String {
        let host = self.authority().map_or("", |a| {
            let a = a.as_str();
            a.rsplit_once('@').map_or(a, |(_, host)| host)
        });
        let hidden = if self.authority().is_some_and(|a| a.as_str().contains('@')) {
            "<redacted>@"
        } else {
            ""
        };
        format!(
            "{}://{hidden}{host}{}",
            self.scheme_str().unwrap_or_default(),
            self.path()
        )
    }
}

/// A share of requests, 0 to 100.
pub(super) fn percent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if !(0.0..=100.0).contains(&value) {
        return Err(D::Error::custom(format!(
            "percent must be between 0 and 100, not {value}"
        )));
    }
    Ok(value)
}

/// A status a client can be answered with instead of the upstream: 400-599.
pub(super) fn error_status<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<StatusCode, D::Error> {
    let value = u16::deserialize(deserializer)?;
    match StatusCode::from_u16(value) {
        Ok(status) if (400..=599).contains(&value) => Ok(status),
        _ => Err(D::Error::custom(format!(
            "status must be 400-599, not {value}"
        ))),
    }
}

pub(super) fn status_number<S: Serializer>(
    status: &StatusCode,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    status.as_u16().serialize(serializer)
}

/// `100/s`, `6000/m`, `1/h`.
fn parse_rate(text: &str) -> anyhow::Result<(NonZeroU32, Duration)> {
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
    if (per / count.get()).is_zero() {
        bail!("`{text}`: the rate is too high (at most 1000000000/s)");
    }
    Ok((count, per))
}

/// `client_ip`, `header:NAME` or `claim:NAME`.
fn parse_rate_key(text: &str) -> anyhow::Result<RateKey> {
    Ok(match text.split_once(':') {
        None if text == "client_ip" => RateKey::ClientIp,
        Some(("header", name)) if !name.trim().is_empty() => RateKey::Header(header_name(name)?),
        Some(("claim", name)) if !name.is_empty() => RateKey::Claim(name.to_string()),
        _ => bail!("`{text}` is not a key: use client_ip, header:NAME or claim:NAME"),
    })
}

/// `10.0.0.0/8`, `::1/128`, or a single address.
fn parse_net(text: &str) -> anyhow::Result<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .with_context(|| format!("`{text}` is not a network (10.0.0.0/8) or an address"))
}

/// A header name as written in the configuration, lower-cased.
fn header_name(name: &str) -> anyhow::Result<HeaderName> {
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

    #[test]
    fn settings_are_shown_as_written() {
        for text in ["100/s", "6000/m", "1/h"] {
            assert_eq!(Rate::parse(text).unwrap().text(), text);
        }
        assert!(Rate::parse("2000000000/s").is_err());
        for text in ["client_ip", "header:x-api-key", "claim:sub"] {
            assert_eq!(RateKey::parse(text).unwrap().text(), text);
        }
        assert_eq!(IpNet::parse("10.1.2.3").unwrap().text(), "10.1.2.3/32");
        assert_eq!(HeaderName::parse(" X-Env ").unwrap().text(), "x-env");
        assert!(Method::parse("G T").is_err() && Method::parse("").is_err());
        assert!(jwt::Algorithm::parse("none").is_err());
        let url = Uri::parse("https://user:pw@idp.example/keys?secret=x").unwrap();
        assert_eq!(url.text(), "https://<redacted>@idp.example/keys");
        assert_eq!(
            Uri::parse("http://idp.example:8080/jwks").unwrap().text(),
            "http://idp.example:8080/jwks"
        );
        for bad in ["ftp://x/keys", "/keys", "https://"] {
            assert!(Uri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn percents_and_statuses_are_bounds_checked() {
        use serde::de::value::{Error, F64Deserializer, U16Deserializer};
        let percent = |value| percent(F64Deserializer::<Error>::new(value));
        assert_eq!(percent(25.5).unwrap(), 25.5);
        assert!(percent(101.0).is_err() && percent(-1.0).is_err() && percent(f64::NAN).is_err());
        let status = |value| error_status(U16Deserializer::<Error>::new(value));
        assert_eq!(status(503).unwrap(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(status(200).is_err() && status(600).is_err() && status(99).is_err());
    }
}
