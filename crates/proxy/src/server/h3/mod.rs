//! HTTP/3 clients (docs/LIFECYCLE-h3.md): each worker's QUIC endpoint
//! (quinn) on its UDP socket of a TLS listener that names `h3` (a client
//! that moves stays with its endpoint: `steer.rs`), each connection's
//! HTTP/3 framing and QPACK by the `h3` crate, and each request handed to
//! the HTTP/2 client codec (`server::h2`, `session::serve_stream`) over an
//! in-process HTTP/2 connection, so that HTTP/3 requests go through the
//! same admission, normalisation, chain, upstream loop, metrics, access
//! log and traces as the other two versions, with no copy of them.

mod bridge;
mod conn;
mod steer;
mod stream;

use std::{
    net::{SocketAddr, UdpSocket},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use quinn::{
    crypto::rustls::QuicServerConfig, EndpointConfig, Runtime as _, TokioRuntime, TransportConfig,
    VarInt,
};
use tls::{rustls::ServerConfig, TlsError};
use tokio::sync::{watch, Semaphore};
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::{
    config::{H3Settings, RetryMode, RETRY_AUTO_ABOVE},
    session::{ConnectionSlot, Worker},
};

pub(crate) use steer::steering;

/// One worker's UDP socket of an h3 listener, and its part of the
/// listener's steering (`steer.rs`).
#[derive(Debug)]
pub(crate) struct H3Socket {
    pub socket: UdpSocket,
    pub part: steer::WorkerSteering,
}

/// A non-blocking UDP socket on `address` that the other workers' sockets
/// share (`SO_REUSEPORT`: the kernel spreads clients over them by their
/// address).
pub(crate) fn bind_udp_shared(address: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    socket.set_reuse_port(true)?;
    if address.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    Ok(socket.into())
}

/// The ALPN id of HTTP/3 (RFC 9114 3.1).
pub(crate) const ALPN_H3: &[u8] = b"h3";

/// Unidirectional streams a client may open: its control stream, the
/// QPACK encoder and decoder streams, and a few more that a client may
/// open to grease (RFC 9114 6.2.3); pushes are never enabled.
const MAX_UNI_STREAMS: u32 = 8;

/// The QUIC configuration of a listener: its TLS (TLS 1.3, ALPN `h3`,
/// no early data so no 0-RTT) and the transport limits of `h3`.
pub(crate) fn quic_config(
    tls: ServerConfig,
    settings: &H3Settings,
) -> Result<quinn::ServerConfig, TlsError> {
    let crypto = QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|err| setup(format!("QUIC needs a TLS 1.3 cipher suite: {err}")))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(settings.idle_timeout)
        .map_err(|_| setup("h3.idle_timeout is too long".into()))?;
    let window = |bytes: u64| VarInt::from_u64(bytes).unwrap_or(VarInt::MAX);
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(settings.max_concurrent_streams))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS))
        .max_idle_timeout(Some(idle))
        .stream_receive_window(window(settings.stream_window))
        .receive_window(window(settings.connection_window))
        .send_window(settings.connection_window);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

fn setup(what: String) -> TlsError {
    TlsError { path: None, what }
}

/// What the endpoint reads for each new connection: the listener's QUIC
/// configuration and settings as they are now (a reload may change them).
pub(crate) trait QuicSource: Send + Sync + 'static {
    fn current(&self) -> Option<(Arc<quinn::ServerConfig>, H3Settings)>;
    /// The route table the listener's requests are routed by.
    fn routes(&self) -> u16 {
        0
    }
}

/// Serves a listener's UDP socket as a QUIC endpoint until `stopped`,
/// then lets its connections finish (they see `stopped` too: GOAWAY).
/// Each connection holds one of the worker's `connections` permits
/// (`limits.max_connections`, shared with its TCP connections): at the
/// limit a new one is refused (CONNECTION_REFUSED), as no backlog waits.
pub(crate) async fn serve_endpoint(
    H3Socket { socket, part }: H3Socket,
    source: Arc<dyn QuicSource>,
    (worker, connections): (Arc<Worker>, Arc<Semaphore>),
    sessions: TaskTracker,
    mut stopped: watch::Receiver<bool>,
) {
    // The endpoint answers Initial packets only with a configuration
    // (without, a stateless reset); each connection is accepted with the
    // one current then, and the endpoint's own follows reloads.
    let Some((mut config, _)) = source.current() else {
        return warn!("an h3 listener without its QUIC configuration");
    };
    let runtime = Arc::new(TokioRuntime);
    // Connection IDs that name this worker; datagrams for another
    // worker's connections handed to it (`steer.rs`).
    let mut endpoint_config = EndpointConfig::default();
    let (steering, me) = (Arc::clone(&part.steering), part.worker);
    endpoint_config
        .cid_generator(move || Box::new(steer::WorkerCids::new(Arc::clone(&steering), me)));
    let socket = match runtime.wrap_udp_socket(socket) {
        Ok(socket) => Arc::new(steer::Steered::new(socket, part, Arc::clone(&worker))),
        Err(err) => return warn!(%err, "cannot serve HTTP/3 on the UDP socket"),
    };
    let initial = Some((*config).clone());
    let endpoint = match quinn::Endpoint::new_with_abstract_socket(
        endpoint_config,
        initial,
        socket,
        runtime,
    ) {
        Ok(endpoint) => endpoint,
        Err(err) => return warn!(%err, "cannot serve HTTP/3 on the UDP socket"),
    };
    let handshaking = Arc::new(AtomicUsize::new(0));
    loop {
        let incoming = tokio::select! {
            biased;
            _ = stopped.wait_for(|stop| *stop) => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
        };
        let Some((current, settings)) = source.current() else {
            incoming.refuse();
            continue;
        };
        if !Arc::ptr_eq(&current, &config) {
            endpoint.set_server_config(Some((*current).clone()));
            config = current;
        }
        let retry = match settings.retry {
            RetryMode::Always => true,
            RetryMode::Never => false,
            RetryMode::Auto => handshaking.load(Ordering::Relaxed) >= RETRY_AUTO_ABOVE,
        };
        if retry && !incoming.remote_address_validated() && incoming.may_retry() {
            // No state kept: the client must come back with the token.
            let _ = incoming.retry();
            continue;
        }
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            incoming.refuse();
            continue;
        };
        match incoming.accept_with(Arc::clone(&config)) {
            Ok(connecting) => {
                let guard = (
                    Handshaking::new(&handshaking),
                    ConnectionSlot::new(permit, &worker),
                );
                let (worker, shutdown) = (Arc::clone(&worker), stopped.clone());
                let settings = (settings, source.routes());
                sessions.spawn(conn::serve(connecting, guard, settings, worker, shutdown));
            }
            Err(err) => debug!(%err, "a QUIC connection refused"),
        }
    }
    // New connections are refused; open ones drain (GOAWAY), then the
    // endpoint's last packets go out before its socket closes.
    endpoint.set_server_config(None);
    endpoint.wait_idle().await;
}

/// One connection's handshake in progress (`retry: auto` counts them).
struct Handshaking(Option<Arc<AtomicUsize>>);

impl Handshaking {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Some(Arc::clone(count)))
    }

    fn done(&mut self) {
        if let Some(count) = self.0.take() {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.done();
    }
}
