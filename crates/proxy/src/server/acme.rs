//! ACME certificates for a TLS listener (`tls.acme`, docs/CONFIG.md): a
//! thread of its own per listener checks the certificate at start and
//! every `check_every`, orders a new one from the CA (instant-acme) when
//! less than `renew_before` is left, answers the CA's challenge (http-01
//! on `http_address`, or tls-alpn-01 on the listener itself), writes the
//! key and chain to the listener's `cert` and `key` files and has the
//! listener read them again: new connections get the new certificate,
//! connections already open keep theirs.
//!
//! Replicas sharing `storage` (a volume) share one ACME account (its
//! credentials in `account.json`, made by the first that needs it) and
//! never order at once: an order is made only under `storage/order.lock`
//! (created exclusively; one older than [`STALE_LOCK`] is a crashed
//! holder's and is taken over). The others find the new files at their
//! next check and serve them. Until the first certificate arrives, the
//! listener serves a self-signed placeholder (so tls-alpn-01 can be
//! answered on it).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, Weak},
    time::{Duration, SystemTime},
};

use anyhow::{bail, Context as _};
use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewAccount, NewOrder, OrderStatus,
    RetryPolicy,
};
use tls::rustls::{
    pki_types::{CertificateDer, PrivateKeyDer},
    sign::CertifiedKey,
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpListener,
};
use tracing::{info, warn};

use super::acme_certs::{expiry, restrict, write_pair};
use super::listener::TlsListener;
use crate::config::{AcmeChallenge, AcmeSettings};

/// A lock this old was left by a replica that died while ordering.
const STALE_LOCK: Duration = Duration::from_secs(600);
/// After a failed order, the next try comes this soon (or at the next check).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(60);

/// Starts the listener's ACME thread.
pub(crate) fn start(listener: &Arc<TlsListener>, settings: AcmeSettings) -> anyhow::Result<()> {
    let http01 = match settings.challenge {
        AcmeChallenge::Http01 => Some(
            std::net::TcpListener::bind(&settings.http_address).with_context(|| {
                format!(
                    "tls.acme.http_address: cannot listen on {}",
                    settings.http_address
                )
            })?,
        ),
        AcmeChallenge::TlsAlpn01 => None,
    };
    let weak = Arc::downgrade(listener);
    std::thread::Builder::new()
        .name("acme".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    return warn!("ACME: no runtime ({err}); certificates will not be renewed")
                }
            };
            runtime.block_on(manage(&weak, settings, http01));
        })?;
    Ok(())
}

/// http-01 tokens and their key authorizations.
type Tokens = Arc<Mutex<HashMap<String, String>>>;

async fn manage(
    listener: &Weak<TlsListener>,
    settings: AcmeSettings,
    http01: Option<std::net::TcpListener>,
) {
    let tokens: Tokens = Arc::default();
    if let Some(socket) = http01 {
        let _ = socket.set_nonblocking(true);
        match TcpListener::from_std(socket) {
            Ok(socket) => drop(tokio::spawn(answer_http01(socket, Arc::clone(&tokens)))),
            Err(err) => warn!("ACME: http-01 listener: {err}"),
        }
    }
    let mut served = None;
    loop {
        let Some(tls) = listener.upgrade() else {
            return;
        };
        let (cert, key) = (tls.cert_path().to_path_buf(), tls.key_path().to_path_buf());
        let on_disk = std::fs::read(&cert).ok();
        if served.is_some() && on_disk != served {
            // Another replica renewed it, or an order of ours wrote it.
            match tls.reload() {
                Ok(()) => {
                    info!(cert = %cert.display(), "ACME: the listener serves the certificate on disk")
                }
                Err(err) => warn!("ACME: the certificate on disk does not load: {err}"),
            }
        }
        served = on_disk;
        let due = match expiry(&cert) {
            Some((not_after, placeholder)) => {
                placeholder
                    || not_after
                        .duration_since(SystemTime::now())
                        .unwrap_or_default()
                        < settings.renew_before
            }
            None => true,
        };
        let mut wait = settings.check_every;
        if due {
            let storage = settings.storage.as_ref().map_or_else(
                || cert.parent().unwrap_or(Path::new(".")).to_path_buf(),
                PathBuf::from,
            );
            match order_under_lock(&settings, &storage, &tls, &tokens, (&cert, &key)).await {
                Ok(true) => {
                    served = std::fs::read(&cert).ok();
                    match tls.reload() {
                        Ok(()) => {
                            info!(cert = %cert.display(), domains = ?settings.domains, "ACME: new certificate served")
                        }
                        Err(err) => warn!("ACME: the new certificate does not load: {err}"),
                    }
                }
                Ok(false) => wait = wait.min(Duration::from_secs(5)),
                Err(err) => {
                    warn!(domains = ?settings.domains, "ACME: no certificate this time: {err:#}");
                    wait = wait.min(RETRY_AFTER_FAILURE);
                }
            }
        }
        drop(tls);
        tokio::time::sleep(wait).await;
    }
}

/// An order, unless another replica holds the lock (`Ok(false)`) or has
/// renewed the certificate meanwhile.
async fn order_under_lock(
    settings: &AcmeSettings,
    storage: &Path,
    tls: &TlsListener,
    tokens: &Tokens,
    (cert, key): (&Path, &Path),
) -> anyhow::Result<bool> {
    std::fs::create_dir_all(storage)
        .with_context(|| format!("cannot create {}", storage.display()))?;
    let lock = storage.join("order.lock");
    let stale = std::fs::metadata(&lock)
        .and_then(|m| m.modified())
        .is_ok_and(|at| at.elapsed().unwrap_or_default() > STALE_LOCK);
    if stale {
        let _ = std::fs::remove_file(&lock);
    }
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_err()
    {
        return Ok(false);
    }
    struct Unlock(PathBuf);
    impl Drop for Unlock {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _unlock = Unlock(lock);
    // Renewed by another replica between our check and the lock?
    if let Some((not_after, false)) = expiry(cert) {
        if not_after
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            >= settings.renew_before
        {
            return Ok(true);
        }
    }
    let account = account(settings, storage).await?;
    let (chain, key_pem) = order(&account, settings, tls, tokens).await?;
    write_pair(cert, key, &chain, &key_pem)?;
    Ok(true)
}

/// The account in `storage/account.json`, made when there is none.
async fn account(settings: &AcmeSettings, storage: &Path) -> anyhow::Result<Account> {
    let builder = || match &settings.ca_file {
        Some(ca) => Account::builder_with_root(ca).context("tls.acme.ca_file"),
        None => Account::builder().context("the system's roots"),
    };
    let file = storage.join("account.json");
    if let Ok(text) = std::fs::read(&file) {
        let credentials = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not an ACME account", file.display()))?;
        return Ok(builder()?.from_credentials(credentials).await?);
    }
    let contact = settings
        .email
        .as_ref()
        .map(|email| format!("mailto:{email}"));
    let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contact,
        terms_of_service_agreed: true,
        only_return_existing: false,
    };
    let (account, credentials) = builder()?
        .create(&new, settings.directory.0.to_string(), None)
        .await?;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&credentials)?)?;
    restrict(&tmp);
    std::fs::rename(&tmp, &file)?;
    info!(account = %account.id(), "ACME: account made");
    Ok(account)
}

/// One order: its challenges answered, the CSR sent, the chain fetched.
async fn order(
    account: &Account,
    settings: &AcmeSettings,
    tls: &TlsListener,
    tokens: &Tokens,
) -> anyhow::Result<(String, String)> {
    let identifiers: Vec<Identifier> = settings
        .domains
        .iter()
        .map(|d| Identifier::Dns(d.clone()))
        .collect();
    let mut new = NewOrder::new(&identifiers);
    if let Some(profile) = &settings.profile {
        new = new.profile(profile);
    }
    let mut order = account.new_order(&new).await?;
    let kind = match settings.challenge {
        AcmeChallenge::Http01 => ChallengeType::Http01,
        AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization?;
        match authorization.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            other => bail!("an authorization is {other:?}"),
        }
        let mut challenge = authorization
            .challenge(kind.clone())
            .with_context(|| format!("the CA offers no {kind:?} challenge"))?;
        let proof = challenge.key_authorization();
        let domain = challenge.identifier().to_string();
        match settings.challenge {
            AcmeChallenge::TlsAlpn01 => {
                let certified = alpn_certificate(&domain, proof.digest().as_ref())?;
                let challenges = tls
                    .alpn_challenges()
                    .context("the listener answers no tls-alpn-01")?;
                challenges.insert(domain, certified);
            }
            AcmeChallenge::Http01 => {
                tokens
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(challenge.token.clone(), proof.as_str().to_string());
            }
        }
        challenge.set_ready().await?;
    }
    let retries = RetryPolicy::new().timeout(Duration::from_secs(90));
    let status = order.poll_ready(&retries).await;
    tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    if let Some(challenges) = tls.alpn_challenges() {
        challenges.clear();
    }
    match status? {
        OrderStatus::Ready => {}
        other => bail!("the order is {other:?}, not ready"),
    }
    let key_pem = order.finalize().await?;
    let chain = order.poll_certificate(&retries).await?;
    Ok((chain, key_pem))
}

/// The tls-alpn-01 certificate for `domain` (RFC 8737: self-signed, with
/// the key authorization's digest in the acmeIdentifier extension).
fn alpn_certificate(domain: &str, digest: &[u8]) -> anyhow::Result<Arc<CertifiedKey>> {
    let mut params = rcgen::CertificateParams::new(vec![domain.to_string()])?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let der =
        PrivateKeyDer::try_from(key.serialize_der()).map_err(|err| anyhow::anyhow!("{err}"))?;
    let signing = tls::provider()
        .key_provider
        .load_private_key(der)
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![CertificateDer::from(cert.der().to_vec())],
        signing,
    )))
}

/// Answers `GET /.well-known/acme-challenge/TOKEN` with its key
/// authorization, and 404 to anything else.
async fn answer_http01(listener: TcpListener, tokens: Tokens) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let tokens = Arc::clone(&tokens);
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(1024);
            let head_end = loop {
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end;
                }
                if buf.len() > 8192 || stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]);
            let target = head.split(' ').nth(1).unwrap_or_default();
            let proof = target
                .strip_prefix("/.well-known/acme-challenge/")
                .and_then(|token| {
                    tokens
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(token)
                        .cloned()
                });
            let answer = match proof {
                Some(proof) => format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{proof}",
                    proof.len()
                ),
                None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
            };
            let _ = stream.write_all(answer.as_bytes()).await;
        });
    }
}
