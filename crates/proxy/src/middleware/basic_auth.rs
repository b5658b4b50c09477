//! `basic_auth`: `Authorization: Basic` checked against an htpasswd file
//! (bcrypt as `htpasswd -B` writes it, or argon2 PHC strings), re-read
//! when it changes (docs/MIDDLEWARE.md).
//!
//! A bcrypt check costs milliseconds, so it never runs on a worker: it
//! goes to tokio's blocking pool (at most [`MAX_CHECKS`] at once, so that
//! wrong passwords cannot take every thread) behind a `Flow::Wait`, and a
//! password found good is remembered for `cache` under an HMAC of user
//! and password with a key made at start: the cache holds no password.
//! An unknown user costs a check against a dummy hash of the file's cost,
//! so timing does not say which users exist. Requests that bring the same
//! credentials while their check is under way wait for that one check:
//! a client opening a hundred connections at once costs one bcrypt, not
//! a hundred queued behind [`MAX_CHECKS`] (measured: 75 of them timed out
//! at 2 s in the bench's middleware row before this).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::bail;
use base64::Engine as _;
use http::{header, HeaderName, HeaderValue, StatusCode};
use ring::hmac;
use tokio::sync::{OnceCell, Semaphore};

use super::{
    build::{Build, Builder},
    watched::Watched,
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::BasicAuthSettings;

/// Password checks running at once, per handler.
const MAX_CHECKS: usize = 4;
/// A check under way for each HMAC of user and password.
type Pending = HashMap<[u8; 32], Arc<OnceCell<bool>>>;

/// The dearest bcrypt cost accepted: `htpasswd -B`'s own maximum.
const MAX_COST: u32 = 17;
/// Good passwords remembered; the cache is emptied when it is full.
const MAX_REMEMBERED: usize = 10_000;

/// An htpasswd file: user -> hash, and a dummy hash for unknown users.
#[derive(Debug)]
pub(crate) struct Users {
    hashes: HashMap<String, Hash>,
    dummy: Hash,
}

#[derive(Debug, Clone)]
pub(crate) enum Hash {
    Bcrypt(String),
    Argon2(String),
}

impl Hash {
    fn verify(&self, password: &[u8]) -> bool {
        match self {
            Self::Bcrypt(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            Self::Argon2(hash) => {
                use argon2::PasswordVerifier as _;
                argon2::PasswordHash::new(hash).is_ok_and(|parsed| {
                    argon2::Argon2::default()
                        .verify_password(password, &parsed)
                        .is_ok()
                })
            }
        }
    }
}

impl Users {
    /// `user:hash` lines; errors name the line, never the hash.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let (hashes, cost) = Self::lines(text)?;
        let salt: [u8; 16] = rand_bytes();
        let dummy = bcrypt::hash_with_salt(salt, cost.unwrap_or(bcrypt::DEFAULT_COST), salt)
            .map_err(|err| anyhow::anyhow!("cannot make the dummy hash: {err}"))?;
        Ok(Self {
            hashes,
            dummy: Hash::Bcrypt(dummy.format_for_version(bcrypt::Version::TwoY)),
        })
    }

    /// The users and the first bcrypt cost (at most [`MAX_COST`]).
    pub(crate) fn lines(text: &str) -> anyhow::Result<(HashMap<String, Hash>, Option<u32>)> {
        let mut hashes = HashMap::new();
        let mut cost = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.split_once(':') else {
                bail!("line {}: not `user:hash`", n + 1);
            };
            let hash = if let Some(rest) = ["$2y$", "$2b$", "$2a$"]
                .iter()
                .find_map(|prefix| hash.strip_prefix(prefix))
            {
                let parsed_cost = rest.get(..2).and_then(|c| c.parse::<u32>().ok());
                if parsed_cost.is_none() || hash.len() != 60 {
                    bail!("line {}: a malformed bcrypt hash", n + 1);
                }
                if parsed_cost.is_some_and(|c| !(4..=MAX_COST).contains(&c)) {
                    bail!("line {}: bcrypt cost must be 4 to {MAX_COST} (htpasswd -B allows up to 17)", n + 1);
                }
                cost = cost.or(parsed_cost);
                Hash::Bcrypt(hash.to_string())
            } else if hash.starts_with("$argon2") {
                if argon2::PasswordHash::new(hash).is_err() {
                    bail!("line {}: a malformed argon2 hash", n + 1);
                }
                Hash::Argon2(hash.to_string())
            } else {
                bail!(
                    "line {}: only bcrypt (htpasswd -B) and argon2 hashes are accepted; MD5, SHA-1 and crypt are too weak",
                    n + 1
                );
            };
            if hashes.insert(user.to_string(), hash).is_some() {
                bail!("line {}: the user is listed twice", n + 1);
            }
        }
        Ok((hashes, cost))
    }
}

fn rand_bytes<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom as _;
    let mut out = [0; N];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .expect("the system's random source");
    out
}

#[derive(Debug)]
pub(crate) struct BasicAuthenticator {
    users: Arc<Watched<Users>>,
    challenge: HeaderValue,
    forward_user: Option<HeaderName>,
    remove_header: bool,
    remember: Duration,
    /// HMAC(user:password) -> until when it is known good.
    remembered: Arc<Mutex<HashMap<[u8; 32], Instant>>>,
    mac_key: hmac::Key,
    checks: Arc<Semaphore>,
    /// Checks under way, by the same HMAC: each credentials' one check.
    pending: Arc<Mutex<Pending>>,
}

impl Build for BasicAuthSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(BasicAuthenticator::new(self)?))
    }
}

impl BasicAuthenticator {
    pub(crate) fn new(settings: &BasicAuthSettings) -> anyhow::Result<Self> {
        if settings
            .realm
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control())
        {
            bail!("realm: no quotes, backslashes or control characters");
        }
        let challenge = HeaderValue::from_str(&format!(
            "Basic realm=\"{}\", charset=\"UTF-8\"",
            settings.realm
        ))?;
        Ok(Self {
            users: Watched::start(&settings.htpasswd.value, settings.reload, Users::parse)?,
            challenge,
            forward_user: settings.forward_user.as_ref().map(|h| h.0.clone()),
            remove_header: settings.remove_header,
            remember: settings.cache,
            remembered: Arc::default(),
            mac_key: hmac::Key::new(hmac::HMAC_SHA256, &rand_bytes::<32>()),
            checks: Arc::new(Semaphore::new(MAX_CHECKS)),
            pending: Arc::default(),
        })
    }

    fn unauthorized(&self, detail: &str) -> Flow {
        Flow::Answer(
            Answer::problem(StatusCode::UNAUTHORIZED, detail)
                .with_header(header::WWW_AUTHENTICATE, self.challenge.clone()),
        )
    }

    fn admit(&self, user: &str, exchange: &mut Exchange) -> Flow {
        admit(
            self.forward_user.as_ref(),
            self.remove_header,
            user,
            exchange,
        )
    }
}

fn admit(forward: Option<&HeaderName>, remove: bool, user: &str, exchange: &mut Exchange) -> Flow {
    if remove {
        exchange.request_headers.remove.push(header::AUTHORIZATION);
    }
    if let (Some(name), Ok(value)) = (forward, HeaderValue::from_str(user)) {
        exchange.request_headers.set(name.clone(), value);
    }
    Flow::Next
}

/// The user and password of an `Authorization: Basic` field.
pub(crate) fn credentials(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") || encoded.len() > 4096 {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

impl Handler for BasicAuthenticator {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        if let Some(name) = &self.forward_user {
            exchange.request_headers.remove.push(name.clone());
        }
        let Some(value) = request.header("authorization") else {
            return self.unauthorized("credentials are required");
        };
        let Some((user, password)) = credentials(value) else {
            return self.unauthorized("the Authorization field is not Basic credentials");
        };
        let mut mac = hmac::Context::with_key(&self.mac_key);
        mac.update(user.as_bytes());
        mac.update(b":");
        mac.update(&password);
        let mut tag = [0; 32];
        tag.copy_from_slice(mac.sign().as_ref());
        let now = Instant::now();
        if !self.remember.is_zero() {
            let remembered = self
                .remembered
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if remembered.get(&tag).is_some_and(|until| *until > now) {
                drop(remembered);
                return self.admit(&user, exchange);
            }
        }
        let users = self.users.load();
        let hash = users.hashes.get(&user).cloned();
        let known = hash.is_some();
        let hash = hash.unwrap_or_else(|| users.dummy.clone());
        let checks = Arc::clone(&self.checks);
        let remembered = Arc::clone(&self.remembered);
        let remember = self.remember;
        let forward = self.forward_user.clone();
        let remove = self.remove_header;
        let challenge = self.challenge.clone();
        let pending = Arc::clone(&self.pending);
        let check = {
            let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(pending.entry(tag).or_default())
        };
        Flow::Wait(Box::pin(async move {
            // One of the waiters runs it; if that one's client goes away,
            // another takes over (OnceCell), so no waiter is left without.
            let verify = || async move {
                match checks.acquire_owned().await {
                    Ok(permit) => tokio::task::spawn_blocking(move || {
                        let good = hash.verify(&password);
                        drop(permit);
                        good
                    })
                    .await
                    .unwrap_or(false),
                    Err(_) => false,
                }
            };
            let good = *check.get_or_init(verify).await;
            {
                let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
                if pending.get(&tag).is_some_and(|c| Arc::ptr_eq(c, &check)) {
                    pending.remove(&tag);
                }
            }
            if !(good && known) {
                return Flow::Answer(
                    Answer::problem(
                        StatusCode::UNAUTHORIZED,
                        "the user or the password is wrong",
                    )
                    .with_header(header::WWW_AUTHENTICATE, challenge),
                );
            }
            if !remember.is_zero() {
                let mut remembered = remembered.lock().unwrap_or_else(PoisonError::into_inner);
                if remembered.len() >= MAX_REMEMBERED {
                    remembered.clear();
                }
                remembered.insert(tag, Instant::now() + remember);
            }
            Flow::Apply(Box::new(move |exchange| {
                admit(forward.as_ref(), remove, &user, exchange)
            }))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htpasswd_lines_are_typed_and_weak_hashes_refused() {
        let bcrypt = bcrypt::hash("pw", 4).unwrap();
        let users = Users::parse(&format!("alice:{bcrypt}\n# comment\n")).unwrap();
        assert!(users.hashes["alice"].verify(b"pw"));
        assert!(!users.hashes["alice"].verify(b"px"));
        assert!(!users.dummy.verify(b"pw"));
        let err = Users::parse("bob:$apr1$abc$def\n").unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("too weak"), "{err}");
        let err = Users::parse(&format!("a:{bcrypt}\na:{bcrypt}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice") && !err.contains(&bcrypt), "{err}");
    }

    #[test]
    fn argon2_hashes_verify() {
        use argon2::PasswordHasher as _;
        let salt = argon2::password_hash::SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let hash = argon2::Argon2::default()
            .hash_password(b"hunter2", &salt)
            .unwrap()
            .to_string();
        let users = Users::parse(&format!("carol:{hash}\n")).unwrap();
        assert!(users.hashes["carol"].verify(b"hunter2"));
        assert!(!users.hashes["carol"].verify(b"hunter3"));
    }

    /// Sixteen requests with the same credentials, all in before any
    /// check ends (a client's connections opening at once): one check,
    /// and every one of them admitted by it.
    #[tokio::test]
    async fn the_same_credentials_at_once_share_one_check() {
        let path = std::env::temp_dir().join(format!("sluice-basic-auth-{}", std::process::id()));
        let bcrypt = bcrypt::hash("pw", 4).unwrap();
        std::fs::write(&path, format!("alice:{bcrypt}\nbob:{bcrypt}\n")).unwrap();
        let yaml = format!("htpasswd: \"{}\"\ncache: 0s\n", path.display());
        let settings: BasicAuthSettings = serde_saphyr::from_str(&yaml).unwrap();
        let auth = BasicAuthenticator::new(&settings).unwrap();
        let ask = |user_password: &str| {
            let mut headers = http::HeaderMap::new();
            let encoded = base64::engine::general_purpose::STANDARD.encode(user_password);
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
            );
            let view = RequestView::get(&headers);
            match auth.request(&view, &mut Exchange::default()) {
                Flow::Wait(wait) => wait,
                _ => panic!("a check to wait for"),
            }
        };
        let mut waits: Vec<_> = (0..16).map(|_| ask("alice:pw")).collect();
        let wrong: Vec<_> = (0..4).map(|_| ask("bob:px")).collect();
        assert_eq!(
            auth.pending.lock().unwrap().len(),
            2,
            "one check per credentials"
        );
        waits.extend(wrong);
        let mut admitted = 0;
        for wait in waits {
            match wait.await {
                Flow::Apply(_) => admitted += 1,
                Flow::Answer(answer) => assert_eq!(answer.status, StatusCode::UNAUTHORIZED),
                _ => panic!("an admission or a 401"),
            }
        }
        assert_eq!(admitted, 16);
        assert!(
            auth.pending.lock().unwrap().is_empty(),
            "no check left behind"
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn basic_credentials_are_read_strictly() {
        assert_eq!(
            credentials(b"Basic YWxpY2U6cDpx"),
            Some(("alice".into(), b"p:q".to_vec()))
        );
        assert_eq!(credentials(b"Bearer YWxpY2U6cA=="), None);
        assert_eq!(credentials(b"Basic !!!"), None);
        assert_eq!(credentials(b"Basic YWxpY2U="), None);
    }
}
