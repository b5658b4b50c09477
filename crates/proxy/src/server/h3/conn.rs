//! One HTTP/3 client connection: the QUIC handshake, the `h3` crate's
//! connection (SETTINGS, QPACK without a dynamic table, GOAWAY), and the
//! in-process HTTP/2 connection its requests are served on.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use tokio::{sync::watch, task::JoinSet};
use tracing::debug;

use super::{stream, Handshaking};
use crate::{
    config::H3Settings,
    session::{ClientOrigin, ConnectionSlot, Worker},
};

/// The in-process pipe between the HTTP/3 side and the HTTP/2 codec,
/// each way: frames move through it, bounded by the HTTP/2 windows.
const BRIDGE_BUFFER: usize = 16 * 1024;
/// The HTTP/2 side's stream window: what one request may have in flight
/// between the two sides.
const BRIDGE_WINDOW: u32 = 256 * 1024;

/// Serves one QUIC connection until it closes or, after the proxy (or
/// its listener) stops, its open requests have finished.
pub(super) async fn serve(
    connecting: quinn::Connecting,
    (mut handshaking, _slot): (Handshaking, ConnectionSlot),
    settings: H3Settings,
    worker: Arc<Worker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let plan = worker.plans.current();
    // A handshake still going at shutdown is dropped, not waited for.
    let handshake = tokio::select! {
        done = tokio::time::timeout(plan.header_read_timeout, connecting) => done,
        _ = shutdown.wait_for(|stop| *stop) => return,
    };
    handshaking.done();
    let quic = match handshake {
        Ok(Ok(quic)) => quic,
        Ok(Err(err)) => {
            worker.metrics().tls_handshake_failed();
            return debug!(%err, "QUIC handshake failed");
        }
        Err(_) => {
            worker.metrics().tls_handshake_failed();
            return debug!("QUIC handshake timed out");
        }
    };
    let peer = quic.remote_address();
    let max_field = settings
        .max_field_section_size
        .unwrap_or(plan.limits.max_head as u64);
    let mut builder = h3::server::builder();
    builder.max_field_section_size(max_field);
    let built = builder.build::<_, Bytes>(h3_quinn::Connection::new(quic.clone()));
    let mut h3 = match tokio::time::timeout(plan.header_read_timeout, built).await {
        Ok(Ok(h3)) => h3,
        Ok(Err(err)) => return debug!(%peer, %err, "HTTP/3 connection setup failed"),
        Err(_) => return debug!(%peer, "HTTP/3 connection setup timed out"),
    };
    let Some(mut bridge) = Bridge::open(peer, &worker).await else {
        return;
    };
    worker.metrics().h3_connection();
    let send_timeout = plan.send_timeout;
    drop(plan);
    let mut streams = JoinSet::new();
    let mut draining = *shutdown.borrow();
    if draining {
        let _ = h3.shutdown(0).await;
    }
    loop {
        // After our GOAWAY, `h3` would wait for the client to leave: the
        // connection ends as soon as its last request is done.
        if draining && streams.is_empty() {
            break;
        }
        let next = tokio::select! {
            accepted = h3.accept() => Next::Accepted(accepted),
            _ = shutdown.wait_for(|stop| *stop), if !draining => Next::Drain,
            Some(_) = streams.join_next(), if !streams.is_empty() => continue,
            // The HTTP/2 side went away (idle, or a flood limit): this
            // connection follows it with GOAWAY.
            Some(_) = bridge.tasks.join_next(), if !draining => Next::Drain,
        };
        match next {
            Next::Accepted(Ok(Some(resolver))) => {
                worker.metrics().h3_stream();
                let h2 = bridge.send.clone();
                streams.spawn(stream::serve(resolver, h2, send_timeout));
            }
            // GOAWAY received or sent, and every request done.
            Next::Accepted(Ok(None)) => break,
            Next::Accepted(Err(err)) => {
                debug!(%peer, %err, "HTTP/3 connection ended");
                break;
            }
            Next::Drain => {
                draining = true;
                // GOAWAY: no new request; those accepted finish.
                if let Err(err) = h3.shutdown(0).await {
                    debug!(%peer, %err, "HTTP/3 GOAWAY failed");
                }
            }
        }
    }
    while streams.join_next().await.is_some() {}
    bridge.close().await;
    quic.close(H3_NO_ERROR, b"");
}

/// The application error code of a clean close (RFC 9114 8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

enum Next<A> {
    Accepted(A),
    Drain,
}

/// The HTTP/2 connection, in this process, that serves the HTTP/3
/// connection's requests: its client side here, its server side the HTTP/2
/// codec (`server::h2::serve`) with this client's address.
struct Bridge {
    send: h2::client::SendRequest<Bytes>,
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
}

impl Bridge {
    async fn open(peer: std::net::SocketAddr, worker: &Arc<Worker>) -> Option<Self> {
        let (client_io, server_io) = tokio::io::duplex(BRIDGE_BUFFER);
        let origin = ClientOrigin {
            peer,
            secure: true,
            alt_svc: None,
            h3: true,
            proxied: None,
        };
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let serve = crate::server::h2::serve(server_io, origin, Arc::clone(worker), stopped);
        tasks.spawn(Box::pin(serve));
        let handshake = h2::client::Builder::new()
            .initial_window_size(BRIDGE_WINDOW)
            .initial_connection_window_size(BRIDGE_WINDOW * 4)
            .max_concurrent_reset_streams(0)
            .handshake::<_, Bytes>(client_io);
        let (send, conn) = match tokio::time::timeout(Duration::from_secs(5), handshake).await {
            Ok(Ok(pair)) => pair,
            _ => {
                debug!(%peer, "the in-process HTTP/2 connection did not open");
                return None;
            }
        };
        tasks.spawn(async move {
            let _ = conn.await;
        });
        Some(Self { send, tasks, stop })
    }

    /// Lets the HTTP/2 side end: its requests are all done.
    async fn close(mut self) {
        let _ = self.stop.send(true);
        drop(self.send);
        while self.tasks.join_next().await.is_some() {}
    }
}
