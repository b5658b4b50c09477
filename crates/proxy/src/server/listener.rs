//! What a listener does with a new connection (docs/LIFECYCLE-h2.md):
//! a TLS handshake if it is a TLS listener (ALPN picks `h2` or
//! `http/1.1`); on a plaintext one, the first bytes tell the HTTP/2
//! connection preface (h2c with prior knowledge) from an HTTP/1.1 request.
//! Then an HTTP/1.1 session (`serve_h1`) or an HTTP/2 connection serves it.

use std::{
    net::SocketAddr,
    num::NonZeroU16,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    time::Duration,
};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::BytesMut;
use http1::io::{preface, Preface, Prefaced};
use tls::{rustls::ServerConfig, tokio_rustls::TlsAcceptor, TlsError};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{watch, OwnedSemaphorePermit},
};
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::proxied::ProxyListener;
use crate::wire::proxy_protocol::{Proxied, Tlvs};
use crate::{
    config::{H3Settings, HttpVersion, ListenerTlsSettings},
    session::Worker,
    session::{serve_h1, ClientOrigin, ConnectionSlot, H2c},
};

const FIRST_READ: usize = 16 * 1024;
/// GOAWAY, last stream 0, PROTOCOL_ERROR (RFC 9113 6.8).
const GOAWAY_PROTOCOL_ERROR: [u8; 17] = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// A TLS listener's settings, with the configuration SIGHUP reloads.
#[derive(Debug)]
pub(crate) struct TlsListener {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    /// ALPN ids offered, in order of preference.
    alpn: Vec<&'static [u8]>,
    /// The versions, cipher suites and key-exchange groups allowed.
    policy: tls::Policy,
    pub handshake_timeout: Duration,
    current: ArcSwap<ServerConfig>,
    /// The HTTP/3 settings, when the listener serves h3 too.
    h3: Option<H3Settings>,
    /// The QUIC configuration built from the same files (ALPN `h3`).
    quic: ArcSwapOption<quinn::ServerConfig>,
    /// With `tls.acme` and tls-alpn-01: the challenge certificates served
    /// to a CA asking with `acme-tls/1`.
    alpn_challenges: Option<Arc<super::acme_certs::AlpnChallenges>>,
}

impl TlsListener {
    /// Reads the certificate, key and client CA files.
    pub(crate) fn load(
        settings: &ListenerTlsSettings,
        versions: &[HttpVersion],
        h3: &H3Settings,
    ) -> Result<Self, TlsError> {
        if let Some(acme) = &settings.acme {
            let (cert, key) = (
                Path::new(&settings.cert.value),
                Path::new(&settings.key.value),
            );
            super::acme_certs::placeholder(acme, cert, key).map_err(|err| TlsError {
                path: Some(cert.to_path_buf()),
                what: format!("cannot write the ACME placeholder: {err:#}"),
            })?;
        }
        let mut listener = Self {
            cert: PathBuf::from(&settings.cert.value),
            key: PathBuf::from(&settings.key.value),
            client_ca: settings
                .client_ca
                .as_ref()
                .map(|ca| PathBuf::from(&ca.value)),
            alpn: [
                (HttpVersion::H2, tls::ALPN_H2),
                (HttpVersion::Http1, tls::ALPN_HTTP11),
            ]
            .into_iter()
            .filter(|(version, _)| versions.contains(version))
            .map(|(_, id)| id)
            .collect(),
            policy: settings.policy(),
            handshake_timeout: settings.handshake_timeout,
            current: ArcSwap::from_pointee(empty_config()?),
            h3: versions.contains(&HttpVersion::H3).then(|| h3.clone()),
            quic: ArcSwapOption::empty(),
            alpn_challenges: settings
                .acme
                .as_ref()
                .filter(|acme| acme.challenge == crate::config::AcmeChallenge::TlsAlpn01)
                .map(|_| Arc::default()),
        };
        listener.current = ArcSwap::from_pointee(listener.read()?);
        listener.quic.store(listener.read_quic()?.map(Arc::new));
        Ok(listener)
    }

    /// The QUIC configuration of an h3 listener, from the same files.
    fn read_quic(&self) -> Result<Option<quinn::ServerConfig>, TlsError> {
        let Some(settings) = &self.h3 else {
            return Ok(None);
        };
        let identity = tls::Identity {
            cert: &self.cert,
            key: &self.key,
        };
        let alpn = [super::h3::ALPN_H3];
        let config =
            tls::server_config_with(identity, self.client_ca.as_deref(), &alpn, &self.policy)?;
        super::h3::quic_config(config, settings).map(Some)
    }

    /// The QUIC configuration and HTTP/3 settings, if the listener serves h3.
    pub(crate) fn quic(&self) -> Option<(Arc<quinn::ServerConfig>, H3Settings)> {
        Some((self.quic.load_full()?, self.h3.clone()?))
    }

    fn read(&self) -> Result<ServerConfig, TlsError> {
        let identity = tls::Identity {
            cert: &self.cert,
            key: &self.key,
        };
        let mut config = tls::server_config_with(
            identity,
            self.client_ca.as_deref(),
            &self.alpn,
            &self.policy,
        )?;
        if let Some(challenges) = &self.alpn_challenges {
            config
                .alpn_protocols
                .push(super::acme_certs::ACME_TLS_ALPN.to_vec());
            config.cert_resolver = Arc::new(super::acme_certs::AcmeResolver {
                inner: Arc::clone(&config.cert_resolver),
                challenges: Arc::clone(challenges),
            });
        }
        Ok(config)
    }

    /// The tls-alpn-01 challenge certificates, with `tls.acme` and tls-alpn-01.
    pub(crate) fn alpn_challenges(&self) -> Option<&Arc<super::acme_certs::AlpnChallenges>> {
        self.alpn_challenges.as_ref()
    }

    pub(crate) fn key_path(&self) -> &Path {
        &self.key
    }

    /// Re-reads the files; on failure the configuration in use stays.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let (tcp, quic) = (self.read()?, self.read_quic()?);
        self.current.store(Arc::new(tcp));
        self.quic.store(quic.map(Arc::new));
        Ok(())
    }

    pub(crate) fn cert_path(&self) -> &Path {
        &self.cert
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.load_full())
    }
}

/// A placeholder until the real files are read (ArcSwap needs a value).
fn empty_config() -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| TlsError {
            path: None,
            what: err.to_string(),
        })?;
    Ok(builder
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(NoCertificate)))
}

#[derive(Debug)]
struct NoCertificate;

impl tls::rustls::server::ResolvesServerCert for NoCertificate {
    fn resolve(
        &self,
        _hello: tls::rustls::server::ClientHello<'_>,
    ) -> Option<Arc<tls::rustls::sign::CertifiedKey>> {
        None
    }
}

/// What a configured listener serves: TLS or not, and which HTTP versions.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub tls: Option<Arc<TlsListener>>,
    pub versions: Vec<HttpVersion>,
    /// The port HTTP/3 is served on (UDP), advertised by `Alt-Svc` on
    /// this listener's responses; none unless it serves h3.
    pub alt_svc: Option<NonZeroU16>,
    /// The route table its requests are routed by.
    pub routes: u16,
    /// Connections begin with a PROXY protocol header (trusted networks).
    pub proxy: Option<ProxyListener>,
}

impl Endpoint {
    /// Reads a TLS listener's files.
    pub(crate) fn new(listener: &crate::config::ListenerSettings) -> Result<Self, TlsError> {
        let tls = listener
            .tls
            .as_ref()
            .map(|tls| TlsListener::load(tls, &listener.protocols, &listener.h3).map(Arc::new))
            .transpose()?;
        Ok(Self {
            tls,
            versions: listener.protocols.clone(),
            alt_svc: None,
            routes: u16::try_from(listener.route_table).unwrap_or(u16::MAX),
            proxy: listener.proxy_protocol.as_ref().map(ProxyListener::new),
        })
    }
}

/// Starts serving a connection accepted by a listener serving `endpoint`,
/// as a task of `sessions` that holds its connection `permit` until it ends.
///
/// Each kind of connection is a task of its own type, so that the common
/// one, plaintext HTTP/1.1 (perhaps h2c), costs only what `serve_h1` keeps
/// while idle: no wrapper future around it, and nothing of TLS or HTTP/2.
/// A tracker, not a `JoinSet`, keeps count of them: it costs a connection
/// no entry of its own. On a `proxy_protocol` listener a task first reads
/// the header, then starts the connection's own task the same way.
pub(crate) fn spawn_connection(
    sessions: &TaskTracker,
    stream: TcpStream,
    peer: SocketAddr,
    endpoint: &Arc<Endpoint>,
    worker: &Arc<Worker>,
    shutdown: &watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) {
    let slot = ConnectionSlot::new(permit, worker);
    let origin = ClientOrigin {
        peer,
        secure: false,
        alt_svc: None,
        h3: false,
        routes: endpoint.routes,
        proxied: None,
    };
    let (worker, shutdown) = (Arc::clone(worker), shutdown.clone());
    if endpoint.proxy.is_some() {
        let tracker = sessions.clone();
        let endpoint = Arc::clone(endpoint);
        let proxied = proxied(tracker, stream, origin, endpoint, worker, shutdown, slot);
        sessions.spawn(boxed(proxied));
        return;
    }
    let mut origin = origin;
    if worker.plans.current().sends_proxy_protocol {
        // Kept for the PROXY protocol header an upstream is sent.
        origin.proxied = Some(Arc::new(Proxied {
            client: peer,
            local: stream.local_addr().ok(),
            via: None,
            version: 0,
            tlvs: Tlvs::default(),
            headers: Arc::default(),
        }));
    }
    let received = BytesMut::new();
    spawn_served(
        sessions,
        (stream, received),
        origin,
        endpoint,
        worker,
        shutdown,
        slot,
    );
}

/// Reads a connection's PROXY protocol header (`server/proxied.rs`), then
/// serves it as the client it names; a refused one is closed.
async fn proxied(
    sessions: TaskTracker,
    mut stream: TcpStream,
    mut origin: ClientOrigin,
    endpoint: Arc<Endpoint>,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
) {
    let Some(proxy) = &endpoint.proxy else {
        return;
    };
    let timeout = worker.plans.current().header_read_timeout;
    let tls = endpoint.tls.is_some();
    let opened = super::proxied::open(
        &mut stream,
        origin.peer,
        proxy,
        tls,
        timeout,
        worker.metrics(),
    );
    let Some(opened) = opened.await else {
        return;
    };
    origin.peer = opened.peer;
    origin.proxied = opened.proxied;
    origin.secure = opened.client_tls;
    let stream = (stream, opened.received);
    spawn_served(&sessions, stream, origin, &endpoint, worker, shutdown, slot);
}

/// Starts the task that serves a connection (TLS, h2c or HTTP/1.1, as
/// `endpoint` says), whose first bytes, if any were read, are `received`.
fn spawn_served(
    sessions: &TaskTracker,
    (stream, received): (TcpStream, BytesMut),
    origin: ClientOrigin,
    endpoint: &Endpoint,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
) {
    match (&endpoint.tls, endpoint.versions.as_slice()) {
        (Some(tls), _) => {
            let origin = ClientOrigin {
                secure: true,
                alt_svc: endpoint.alt_svc,
                ..origin
            };
            sessions.spawn(secure(
                stream,
                origin,
                Arc::clone(tls),
                worker,
                shutdown,
                slot,
            ));
        }
        (None, [HttpVersion::H2]) => {
            let stream = (stream, received);
            sessions.spawn(h2_only(stream, origin, worker, shutdown, slot));
        }
        (None, [HttpVersion::Http1]) => {
            sessions.spawn(serve_h1(
                stream, received, origin, worker, shutdown, None, slot,
            ));
        }
        (None, _) => {
            let h2c: H2c<TcpStream> = serve_h2c;
            sessions.spawn(serve_h1(
                stream,
                received,
                origin,
                worker,
                shutdown,
                Some(h2c),
                slot,
            ));
        }
    }
}

/// A plaintext connection that opened with the HTTP/2 preface.
pub(crate) fn serve_h2c(
    stream: Prefaced<TcpStream>,
    origin: ClientOrigin,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
) -> Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    boxed(super::h2::serve(stream, origin, worker, shutdown))
}

/// An h2c-only listener: the preface, or GOAWAY (PROTOCOL_ERROR).
async fn h2_only(
    (mut stream, mut received): (TcpStream, BytesMut),
    origin: ClientOrigin,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    _slot: ConnectionSlot,
) {
    let idle = worker.plans.current().idle_timeout;
    while preface(&received) == Preface::Partial {
        let read = async {
            stream.readable().await?;
            received.reserve(FIRST_READ);
            stream.read_buf(&mut received).await
        };
        match tokio::time::timeout(idle, read).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    }
    if preface(&received) == Preface::Complete {
        let stream = Prefaced::new(received.freeze(), stream);
        return boxed(super::h2::serve(stream, origin, worker, shutdown)).await;
    }
    debug!(peer = %origin.peer, "no HTTP/2 preface on an h2c-only listener");
    if stream.write_all(&GOAWAY_PROTOCOL_ERROR).await.is_ok() && stream.shutdown().await.is_ok() {
        http1::io::linger(&mut stream).await;
    }
}

/// A connection's future on the heap: TLS and HTTP/2 state is kilobytes,
/// and inline it would make every connection's task as large.
fn boxed(
    connection: impl std::future::Future<Output = ()> + Send + 'static,
) -> Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(connection)
}

async fn secure(
    stream: TcpStream,
    origin: ClientOrigin,
    tls: Arc<TlsListener>,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
) {
    let worker = &worker;
    let peer = origin.peer;
    let handshake = tls.acceptor().accept(stream);
    let stream = match tokio::time::timeout(tls.handshake_timeout, handshake).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            worker.metrics().tls_handshake_failed();
            return debug!(%peer, %err, "TLS handshake failed");
        }
        Err(_) => {
            worker.metrics().tls_handshake_failed();
            return debug!(%peer, timeout = ?tls.handshake_timeout, "TLS handshake timed out");
        }
    };
    if stream.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
        super::h2::serve(stream, origin, Arc::clone(worker), shutdown).await;
    } else {
        let worker = Arc::clone(worker);
        serve_h1(
            stream,
            BytesMut::new(),
            origin,
            worker,
            shutdown,
            None,
            slot,
        )
        .await;
    }
}
