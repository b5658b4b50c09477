//! What ties a request to a host: the key `balance: hash` hashes (client
//! address, a header, a cookie, a query parameter or the path), the
//! signed cookie `sticky.cookie` inserts, and the values of the
//! application's own cookie that `sticky.app_cookie` learned.

use std::{collections::HashMap, net::IpAddr, sync::Mutex};

use ring::{hmac, rand::SecureRandom};

use super::ring::hash_bytes;
use crate::{config::HashKey, wire::head::Outgoing};

/// The hash of `key` in `request`, or `None` when the request lacks it
/// (then the pick falls back to round robin, as HAProxy's `balance hdr`).
pub(super) fn hash_key(key: &HashKey, request: &Outgoing<'_>, peer: IpAddr) -> Option<u64> {
    match key {
        HashKey::ClientIp => Some(match peer {
            IpAddr::V4(ip) => hash_bytes(&ip.octets()),
            IpAddr::V6(ip) => hash_bytes(&ip.octets()),
        }),
        HashKey::Path => Some(hash_bytes(request.path)),
        HashKey::Header(name) => request.fields.get(name).map(hash_bytes),
        HashKey::Cookie(name) => cookie(request, name).map(hash_bytes),
        HashKey::Query(name) => query_parameter(request.query?, name).map(hash_bytes),
    }
}

/// The value of cookie `name` in the request's `Cookie` fields.
pub(super) fn cookie<'a>(request: &Outgoing<'a>, name: &str) -> Option<&'a [u8]> {
    request
        .fields
        .get_all("cookie")
        .flat_map(|field| field.split(|&b| b == b';'))
        .find_map(|pair| pair_value(pair.trim_ascii(), name))
}

/// `value` of a `name=value` pair.
fn pair_value<'a>(pair: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let rest = pair.strip_prefix(name.as_bytes())?;
    rest.strip_prefix(b"=")
}

/// The raw (not percent-decoded) value of parameter `name` in `query`.
fn query_parameter<'a>(query: &'a [u8], name: &str) -> Option<&'a [u8]> {
    query.split(|&b| b == b'&').find_map(|pair| {
        pair_value(pair, name).or_else(|| (pair == name.as_bytes()).then_some(&[][..]))
    })
}

/// The cookie the proxy inserts: its name and each host's value, an HMAC
/// of the host's URL, so that a client can neither forge a host nor learn
/// its address, and a removed host's cookie matches nothing.
#[derive(Debug)]
pub(super) struct StickyCookie {
    pub name: String,
    /// By host: the cookie value naming it.
    tokens: Vec<String>,
    /// By host: the whole `Set-Cookie` value.
    set_cookie: Vec<http::HeaderValue>,
}

impl StickyCookie {
    /// `key`: the configured secret, or `None` for a random one.
    pub(super) fn new(name: &str, key: Option<&str>, urls: &[&str]) -> anyhow::Result<Self> {
        let key = match key {
            Some(secret) => hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()),
            None => {
                let mut secret = [0u8; 32];
                ring::rand::SystemRandom::new()
                    .fill(&mut secret)
                    .map_err(|_| anyhow::anyhow!("no random source for the sticky cookie key"))?;
                hmac::Key::new(hmac::HMAC_SHA256, &secret)
            }
        };
        let tokens: Vec<String> = urls
            .iter()
            .map(|url| {
                let tag = hmac::sign(&key, url.as_bytes());
                tag.as_ref()[..16]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        let set_cookie = tokens
            .iter()
            .map(|token| {
                http::HeaderValue::from_str(&format!(
                    "{name}={token}; Path=/; HttpOnly; SameSite=Lax"
                ))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: name.to_string(),
            tokens,
            set_cookie,
        })
    }

    /// The host the request's cookie names, if it is a valid one.
    pub(super) fn host(&self, request: &Outgoing<'_>) -> Option<usize> {
        let value = cookie(request, &self.name)?;
        self.tokens.iter().position(|t| t.as_bytes() == value)
    }

    pub(super) fn set_cookie(&self, host: usize) -> Option<&http::HeaderValue> {
        self.set_cookie.get(host)
    }
}

/// The application cookie's values and the host that set each one.
#[derive(Debug)]
pub(super) struct AppCookie {
    pub name: String,
    learned: Mutex<HashMap<Box<[u8]>, u32>>,
}

/// Values remembered at most; past it the table starts over (a client
/// whose value was forgotten gets a fresh pick, like a new session).
const APP_COOKIE_ENTRIES: usize = 100_000;

impl AppCookie {
    pub(super) fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            learned: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn host(&self, request: &Outgoing<'_>) -> Option<usize> {
        let value = cookie(request, &self.name)?;
        let learned = self.learned.lock().ok()?;
        learned.get(value).map(|&h| h as usize)
    }

    /// Learns from one `Set-Cookie` field of `host`'s answer.
    pub(super) fn learn(&self, set_cookie: &[u8], host: usize) {
        let first = set_cookie.split(|&b| b == b';').next().unwrap_or_default();
        let Some(value) = pair_value(first.trim_ascii(), &self.name) else {
            return;
        };
        if let Ok(mut learned) = self.learned.lock() {
            if learned.len() >= APP_COOKIE_ENTRIES {
                learned.clear();
            }
            learned.insert(value.into(), u32::try_from(host).unwrap_or(u32::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fields::Fields;
    use http::{HeaderMap, HeaderValue, Method};

    fn request<'a>(map: &'a HeaderMap, query: Option<&'a [u8]>) -> Outgoing<'a> {
        Outgoing {
            method: &Method::GET,
            path: b"/a/b",
            query,
            host: None,
            fields: Fields::Map(map),
        }
    }

    #[test]
    fn keys_come_from_the_request() {
        let mut map = HeaderMap::new();
        map.insert("x-user", HeaderValue::from_static("ann"));
        map.append("cookie", HeaderValue::from_static("a=1; sid=xyz"));
        let r = request(&map, Some(b"k=v&tenant=7"));
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let get = |key: HashKey| hash_key(&key, &r, peer);
        assert_eq!(
            get(HashKey::Header("x-user".into())),
            Some(hash_bytes(b"ann"))
        );
        assert_eq!(get(HashKey::Cookie("sid".into())), Some(hash_bytes(b"xyz")));
        assert_eq!(get(HashKey::Query("tenant".into())), Some(hash_bytes(b"7")));
        assert_eq!(get(HashKey::Path), Some(hash_bytes(b"/a/b")));
        assert_eq!(
            get(HashKey::Cookie("si".into())),
            None,
            "a prefix is not a name"
        );
        assert_eq!(get(HashKey::Header("x-none".into())), None);
        assert!(get(HashKey::ClientIp).is_some());
    }

    #[test]
    fn sticky_tokens_name_hosts_and_cannot_be_forged() {
        let urls = ["http://a:1", "http://b:1"];
        let sticky = StickyCookie::new("lb", Some("secret"), &urls).unwrap();
        let set = sticky.set_cookie(1).unwrap().to_str().unwrap().to_string();
        let value = set.split(';').next().unwrap().to_string();
        let mut map = HeaderMap::new();
        map.insert("cookie", HeaderValue::from_str(&value).unwrap());
        assert_eq!(sticky.host(&request(&map, None)), Some(1));
        map.insert("cookie", HeaderValue::from_static("lb=1"));
        assert_eq!(sticky.host(&request(&map, None)), None, "forged");
        let other_key = StickyCookie::new("lb", Some("other"), &urls).unwrap();
        map.insert("cookie", HeaderValue::from_str(&value).unwrap());
        assert_eq!(
            other_key.host(&request(&map, None)),
            None,
            "another key's cookie"
        );
    }

    #[test]
    fn app_cookie_values_are_learned_from_answers() {
        let app = AppCookie::new("JSESSIONID");
        app.learn(b"JSESSIONID=abc; Path=/; HttpOnly", 2);
        app.learn(b"other=1", 0);
        let mut map = HeaderMap::new();
        map.insert("cookie", HeaderValue::from_static("JSESSIONID=abc"));
        assert_eq!(app.host(&request(&map, None)), Some(2));
        map.insert("cookie", HeaderValue::from_static("JSESSIONID=zzz"));
        assert_eq!(app.host(&request(&map, None)), None);
    }
}
