//! What ties a request to a host: the key `balance: hash` hashes (client
//! address, a header, a cookie, a query parameter or the path), the
//! signed cookie `sticky.cookie` inserts, and the values of the
//! application's own cookie that `sticky.app_cookie` learned.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Mutex, OnceLock},
};

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
pub(crate) fn cookie<'a>(request: &Outgoing<'a>, name: &str) -> Option<&'a [u8]> {
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

/// The key of every sticky cookie without `sticky.key`: made once per
/// process, so that a reload or a discovery round, which compiles the
/// upstreams anew, keeps the cookies clients hold valid.
static GENERATED_KEY: OnceLock<hmac::Key> = OnceLock::new();

fn generated_key() -> anyhow::Result<hmac::Key> {
    if let Some(key) = GENERATED_KEY.get() {
        return Ok(key.clone());
    }
    let mut secret = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| anyhow::anyhow!("no random source for the sticky cookie key"))?;
    // Two compiles at once: the first key stored is the one both use.
    let _ = GENERATED_KEY.set(hmac::Key::new(hmac::HMAC_SHA256, &secret));
    GENERATED_KEY
        .get()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the sticky cookie key was not stored"))
}

impl StickyCookie {
    /// `key`: the configured secret, or `None` for the process's random one.
    pub(super) fn new(name: &str, key: Option<&str>, urls: &[&str]) -> anyhow::Result<Self> {
        let key = match key {
            Some(secret) => hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()),
            None => generated_key()?,
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

    /// Takes over what `old` (the same upstream in the plan before) learned,
    /// for the hosts this plan keeps: `moved[h]` is old host `h`'s index
    /// here. What the old plan's requests learn after this is lost (a
    /// fresh pick for those clients, as after a forgotten value).
    pub(super) fn take_over(&self, old: &AppCookie, moved: &[Option<usize>]) {
        if old.name != self.name {
            return;
        }
        let (Ok(old), Ok(mut learned)) = (old.learned.lock(), self.learned.lock()) else {
            return;
        };
        for (value, &host) in old.iter() {
            let here = moved.get(host as usize).copied().flatten();
            if let Some(here) = here.and_then(|h| u32::try_from(h).ok()) {
                learned.insert(value.clone(), here);
            }
        }
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

    #[test]
    fn without_a_key_every_compile_signs_alike() {
        let urls = ["http://a:1@127.0.0.1:1", "http://b:1@127.0.0.1:2"];
        let before = StickyCookie::new("lb", None, &urls).unwrap();
        let after = StickyCookie::new("lb", None, &urls[1..]).unwrap();
        assert_eq!(before.set_cookie(1), after.set_cookie(0));
    }

    #[test]
    fn learned_values_follow_their_host_into_the_next_plan() {
        let old = AppCookie::new("sid");
        old.learn(b"sid=kept", 1);
        old.learn(b"sid=gone", 0);
        let new = AppCookie::new("sid");
        // Old host 0 was dropped; old host 1 is host 0 now.
        new.take_over(&old, &[None, Some(0)]);
        let mut map = HeaderMap::new();
        map.insert("cookie", HeaderValue::from_static("sid=kept"));
        assert_eq!(new.host(&request(&map, None)), Some(0));
        map.insert("cookie", HeaderValue::from_static("sid=gone"));
        assert_eq!(new.host(&request(&map, None)), None);
        let renamed = AppCookie::new("other");
        renamed.take_over(&old, &[None, Some(0)]);
        assert_eq!(renamed.learned.lock().unwrap().len(), 0);
    }
}
