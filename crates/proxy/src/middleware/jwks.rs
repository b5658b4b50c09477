//! Where a `jwt` handler's keys come from: a JWKS file or URL, loaded at
//! start (a failure stops the start), then refreshed by a thread of its
//! own every `refresh` and, at most every [`MIN_REFETCH`], when a token
//! names a key we do not have (rotation without restart). A failed refresh
//! keeps the keys we had and logs why.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use bytes::{Buf, BytesMut};
use jwt::{KeySet, KeyStore};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    sync::{watch, Notify},
};
use tracing::{info, warn};

/// Unknown-kid refetches are at most this frequent, so that tokens with
/// made-up kids cannot turn the proxy against the identity provider.
pub(crate) const MIN_REFETCH: Duration = Duration::from_secs(10);
/// A JWKS larger than this is refused.
const MAX_JWKS: usize = 1024 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
enum Location {
    File(PathBuf),
    Url(http::Uri),
}

/// A key store and what keeps it fresh.
#[derive(Debug)]
pub(crate) struct KeySource {
    location: Location,
    pub store: Arc<KeyStore>,
    /// Wakes the refresher for an unknown kid.
    refetch: Notify,
    /// Bumped after every refresh attempt, so that a waiting request retries.
    attempts: watch::Sender<u64>,
    /// When the last unknown-kid refetch was asked for (ms since `epoch`).
    last_refetch: AtomicU64,
    epoch: Instant,
}

impl KeySource {
    /// Loads the keys once and starts the refresher.
    pub(crate) fn start(
        file: Option<&str>,
        url: Option<http::Uri>,
        refresh: Duration,
    ) -> anyhow::Result<Arc<Self>> {
        let location = match (file, url) {
            (Some(file), None) => Location::File(PathBuf::from(file)),
            (None, Some(url)) => Location::Url(url),
            _ => bail!("give exactly one of `jwks` (a file) and `jwks_url`"),
        };
        // Loaded on a thread of its own: the caller may be inside a runtime.
        let first = {
            let location = location.clone();
            std::thread::spawn(move || load_blocking(&location))
                .join()
                .map_err(|_| anyhow::anyhow!("the JWKS loader panicked"))??
        };
        info!(keys = first.len(), source = %describe(&location), "JWKS loaded");
        let source = Arc::new(Self {
            location,
            store: Arc::new(KeyStore::new(first)),
            refetch: Notify::new(),
            attempts: watch::channel(0).0,
            last_refetch: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let refresher = Arc::downgrade(&source);
        std::thread::Builder::new()
            .name("jwks-refresh".into())
            .spawn(move || refresh_loop(&refresher, refresh))
            .context("cannot start the JWKS refresher")?;
        Ok(source)
    }

    /// Asks for a refetch unless one was asked for recently; the receiver
    /// changes once it has been tried.
    pub(crate) fn refetch(&self) -> Option<watch::Receiver<u64>> {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_refetch.load(Ordering::Acquire);
        let due = last == 0 || now.saturating_sub(last) >= MIN_REFETCH.as_millis() as u64;
        if !due
            || self
                .last_refetch
                .compare_exchange(last, now.max(1), Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        let attempts = self.attempts.subscribe();
        self.refetch.notify_one();
        Some(attempts)
    }
}

/// Reloads every `refresh` or when asked; ends with the last handler.
fn refresh_loop(source: &std::sync::Weak<KeySource>, refresh: Duration) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return warn!("cannot build the JWKS refresher runtime; keys will not be refreshed");
    };
    runtime.block_on(async {
        loop {
            let Some(wake) = source.upgrade() else { return };
            let asked = async { wake.refetch.notified().await };
            tokio::select! {
                () = tokio::time::sleep(refresh) => {}
                () = asked => {}
            }
            drop(wake);
            let Some(source) = source.upgrade() else { return };
            match load(&source.location).await {
                Ok(keys) => source.store.replace(keys),
                Err(err) => {
                    warn!(source = %describe(&source.location), "JWKS refresh failed, keeping the keys we have: {err:#}");
                }
            }
            source.attempts.send_modify(|n| *n += 1);
        }
    });
}

fn describe(location: &Location) -> String {
    match location {
        Location::File(path) => path.display().to_string(),
        // The query may carry credentials.
        Location::Url(uri) => format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.host()),
            uri.path()
        ),
    }
}

fn load_blocking(location: &Location) -> anyhow::Result<KeySet> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(load(location))
}

async fn load(location: &Location) -> anyhow::Result<KeySet> {
    let bytes = match location {
        // A JWKS file is small and local: read on the refresher's own thread.
        Location::File(path) => std::fs::read(path)
            .with_context(|| format!("cannot read the JWKS file `{}`", path.display()))?,
        Location::Url(uri) => tokio::time::timeout(FETCH_TIMEOUT, fetch(uri))
            .await
            .with_context(|| {
                format!(
                    "no JWKS from {} within {FETCH_TIMEOUT:?}",
                    describe(location)
                )
            })?
            .with_context(|| format!("cannot fetch the JWKS from {}", describe(location)))?,
    };
    let (keys, problems) = KeySet::from_jwks_lenient(&bytes)
        .with_context(|| format!("{}: not a usable JWKS", describe(location)))?;
    for problem in problems {
        warn!(source = %describe(location), "JWKS key skipped: {problem}");
    }
    if keys.is_empty() {
        bail!("{}: the JWKS has no usable signing key", describe(location));
    }
    Ok(keys)
}

/// `GET uri` over HTTP/1.1 (TLS for https, with the web's root
/// certificates); the body of a 200 answer.
async fn fetch(uri: &http::Uri) -> anyhow::Result<Vec<u8>> {
    let (status, body) = call(uri, "GET", "Accept: application/json\r\n", b"").await?;
    if status != http::StatusCode::OK {
        bail!("answered {status}");
    }
    Ok(body)
}

/// One request over a connection of its own (HTTP/1.1, TLS with the web's
/// root certificates for https): `method uri` with the `extra` header
/// lines (each ending in CRLF) and `body`; the answer's status and body
/// (at most 1 MiB). For the identity provider's few calls (discovery,
/// keys, tokens), which are rare next to requests.
pub(super) async fn call(
    uri: &http::Uri,
    method: &str,
    extra: &str,
    body: &[u8],
) -> anyhow::Result<(http::StatusCode, Vec<u8>)> {
    let host = uri.host().context("no host")?.trim_matches(['[', ']']);
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let stream = TcpStream::connect((host, port)).await?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let length = if body.is_empty() && method == "GET" {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n{extra}{length}Connection: close\r\nUser-Agent: sluice\r\n\r\n",
        uri.authority().map_or(host, |a| a.as_str())
    )
    .into_bytes();
    request.extend_from_slice(body);
    if https {
        let config = tls::client_config(tls::Trust::WebRoots, None, &[tls::ALPN_HTTP11])?;
        let name = tls::rustls::pki_types::ServerName::try_from(host.to_string())?;
        let tls = tls::tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, stream)
            .await?;
        round_trip(tls, &request).await
    } else {
        round_trip(stream, &request).await
    }
}

async fn round_trip(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &[u8],
) -> anyhow::Result<(http::StatusCode, Vec<u8>)> {
    stream.write_all(request).await?;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut fields = Vec::new();
    let head = loop {
        if let Some(head) = http1::parse_response_head(&buf, 64 * 1024, false, &mut fields)
            .map_err(|rejection| anyhow::anyhow!("{}", rejection.detail))?
        {
            break head;
        }
        if stream.read_buf(&mut buf).await? == 0 {
            bail!("the connection closed before the response head");
        }
    };
    buf.advance(head.len);
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: MAX_JWKS,
    };
    let mut body = Vec::new();
    let mut chunked = http1::ChunkedDecoder::default();
    loop {
        let done = match head.framing {
            http1::BodyFraming::None => true,
            http1::BodyFraming::Length(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if n > MAX_JWKS {
                    bail!("the answer is larger than {MAX_JWKS} bytes");
                }
                let take = (n - body.len()).min(buf.len());
                body.extend_from_slice(&buf[..take]);
                buf.advance(take);
                body.len() == n
            }
            http1::BodyFraming::Chunked => {
                let decoded = chunked
                    .decode(&buf, &limits, |data| body.extend_from_slice(data))
                    .map_err(|rejection| anyhow::anyhow!("{}", rejection.detail))?;
                buf.advance(decoded.consumed);
                decoded.done
            }
            http1::BodyFraming::UntilClose => {
                body.extend_from_slice(&buf);
                buf.clear();
                false
            }
        };
        if done {
            return Ok((head.status, body));
        }
        if body.len() > MAX_JWKS {
            bail!("the answer is larger than {MAX_JWKS} bytes");
        }
        if stream.read_buf(&mut buf).await? == 0 {
            if head.framing == http1::BodyFraming::UntilClose {
                return Ok((head.status, body));
            }
            bail!("the connection closed mid-body");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in the temp directory holding `text`.
    fn jwks_file(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("sluice-jwks-{name}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn start_err(file: Option<&str>, url: Option<&str>) -> String {
        KeySource::start(
            file,
            url.map(|u| u.parse().unwrap()),
            Duration::from_secs(3600),
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn a_bad_key_source_stops_the_start_with_why() {
        let both = start_err(Some("/nonexistent"), Some("http://127.0.0.1:9/keys"));
        assert!(both.contains("exactly one"), "{both}");
        assert!(start_err(None, None).contains("exactly one"));
        let missing = format!(
            "{:#}",
            KeySource::start(Some("/nonexistent/jwks.json"), None, Duration::from_secs(1))
                .unwrap_err()
        );
        assert!(
            missing.contains("cannot read the JWKS file `/nonexistent/jwks.json`"),
            "{missing}"
        );
        for (name, text, why) in [
            ("garbage", "{\"keys\": [", "not a usable JWKS"),
            ("not-a-set", "[1, 2]", "not a usable JWKS"),
            // Keys it cannot use (an unknown type, an encryption key) are
            // skipped; none left is no key source.
            (
                "unusable",
                r#"{"keys": [{"kty": "XYZ", "kid": "a"}, {"kty": "oct", "use": "enc", "k": "AAAA"}]}"#,
                "no usable signing key",
            ),
        ] {
            let path = jwks_file(name, text);
            let err = format!(
                "{:#}",
                KeySource::start(path.to_str(), None, Duration::from_secs(1)).unwrap_err()
            );
            assert!(err.contains(why), "{name}: {err}");
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn a_jwks_url_is_described_without_credentials_or_query() {
        let url = Location::Url(
            "https://user:pw@idp.example:8443/keys?token=abc"
                .parse()
                .unwrap(),
        );
        assert_eq!(describe(&url), "https://idp.example/keys");
    }

    /// Unknown-kid refetches are rate-limited; one asked for reloads the
    /// keys (the file rotated to a new key) and tells the waiter.
    #[tokio::test]
    async fn an_unknown_kid_refetches_once_then_is_rate_limited() {
        let first = jwt::generate_key(jwt::Algorithm::ES256, "first").unwrap();
        let path = jwks_file("rotate", &first.jwks_json());
        let source = KeySource::start(path.to_str(), None, Duration::from_secs(3600)).unwrap();
        assert!(source.store.load().get("first").is_some());
        let second = jwt::generate_key(jwt::Algorithm::ES256, "second").unwrap();
        std::fs::write(&path, second.jwks_json()).unwrap();
        let mut refetched = source.refetch().expect("the first refetch is due");
        assert!(source.refetch().is_none(), "a second within MIN_REFETCH");
        tokio::time::timeout(Duration::from_secs(20), refetched.changed())
            .await
            .expect("the refresher tried within 20 s")
            .unwrap();
        assert!(source.store.load().get("second").is_some());
        assert!(source.store.load().get("first").is_none());
        // A broken file at the next try keeps the keys we have.
        std::fs::write(&path, "not json").unwrap();
        source.last_refetch.store(0, Ordering::Release);
        let mut refetched = source.refetch().expect("due again");
        tokio::time::timeout(Duration::from_secs(20), refetched.changed())
            .await
            .expect("the refresher tried within 20 s")
            .unwrap();
        assert!(source.store.load().get("second").is_some());
        std::fs::remove_file(path).unwrap();
    }

    /// What `round_trip` makes of `answer` from the server (then closed).
    async fn answered(answer: &[u8]) -> anyhow::Result<(http::StatusCode, Vec<u8>)> {
        let (client, mut server) = tokio::io::duplex(4 * 1024 * 1024);
        let answer = answer.to_vec();
        let serve = tokio::spawn(async move {
            let mut request = [0; 1024];
            let _ = server.read(&mut request).await;
            let _ = server.write_all(&answer).await;
        });
        let result = round_trip(client, b"GET / HTTP/1.1\r\n\r\n").await;
        serve.await.unwrap();
        result
    }

    #[tokio::test]
    async fn answers_are_read_by_length_chunks_or_close() {
        let (status, body) = answered(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloIGNORED")
            .await
            .unwrap();
        assert_eq!((status.as_u16(), &body[..]), (200, &b"hello"[..]));
        let (_, body) = answered(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(body, b"abcde");
        let (status, body) = answered(b"HTTP/1.1 404 Not Found\r\n\r\nuntil close")
            .await
            .unwrap();
        assert_eq!((status.as_u16(), &body[..]), (404, &b"until close"[..]));
    }

    #[tokio::test]
    async fn a_hostile_or_broken_answer_is_an_error_not_a_hang_or_a_huge_buffer() {
        for (answer, why) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n{"[..],
                "larger than",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                "mid-body",
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Le", "before the response head"),
            (b"", "before the response head"),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "",
            ),
            (b"NOT HTTP AT ALL\r\n\r\n", ""),
        ] {
            let err = answered(answer)
                .await
                .expect_err(&String::from_utf8_lossy(answer))
                .to_string();
            assert!(err.contains(why), "{err}");
        }
        // A body past MAX_JWKS without a length is cut off too.
        let mut huge = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        huge.resize(huge.len() + MAX_JWKS + 1024, b'x');
        let err = answered(&huge).await.unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }
}
