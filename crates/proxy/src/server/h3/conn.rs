//! One HTTP/3 client connection: the QUIC handshake, sluice's HTTP/3
//! codec (the `http3` crate: SETTINGS, the client's control and QPACK
//! streams, GOAWAY), the premature-reset count, and the in-process HTTP/2
//! connection its requests are served on.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http3::{
    server::{Connection, End},
    Code,
};
use tokio::{sync::watch, task::JoinSet};
use tracing::debug;

use super::{
    stream::{self, Ended},
    Handshaking,
};
use crate::{
    config::H3Settings,
    server::resets::PrematureResets,
    session::{ClientOrigin, ConnectionSlot, Worker},
    telemetry::Event,
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
    (settings, routes): (H3Settings, u16),
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
    let codec = http3::server::Settings {
        max_field_section_size: settings
            .max_field_section_size
            .unwrap_or(plan.limits.max_head as u64),
        huffman: plan.http2.huffman,
    };
    let mut h3 =
        match tokio::time::timeout(plan.header_read_timeout, Connection::new(quic, codec)).await {
            Ok(Ok(h3)) => h3,
            Ok(Err(err)) => return debug!(%peer, ?err, "HTTP/3 connection setup failed"),
            Err(_) => return debug!(%peer, "HTTP/3 connection setup timed out"),
        };
    let Some(mut bridge) = Bridge::open(peer, routes, &worker).await else {
        return;
    };
    worker.metrics().h3_connection();
    let limits = stream::Limits {
        head: plan.header_read_timeout,
        send: plan.send_timeout,
    };
    let mut resets = PrematureResets::new(
        plan.http2.max_premature_resets,
        plan.http2.premature_reset_window,
    );
    drop(plan);
    let mut streams = JoinSet::new();
    let mut draining = *shutdown.borrow_and_update();
    if draining {
        h3.goaway().await;
    }
    loop {
        // After GOAWAY the connection ends as soon as its last request is
        // done, without waiting for the client to leave.
        if draining && streams.is_empty() {
            break;
        }
        tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(request) => {
                    worker.metrics().h3_stream();
                    streams.spawn(stream::serve(request, bridge.send.clone(), limits));
                }
                Err(End::Closed(err)) => {
                    debug!(%peer, %err, "HTTP/3 connection ended");
                    break;
                }
                Err(End::Error(err)) => {
                    debug!(%peer, %err, "HTTP/3 connection closed for a protocol error");
                    break;
                }
            },
            Some(ended) = streams.join_next(), if !streams.is_empty() => {
                // A stream the client reset or stopped before its answer was
                // complete (its upstream work was cancelled then): many of
                // them is the rapid-reset attack, as for HTTP/2.
                if matches!(ended, Ok(Ended::Reset)) && resets.flood(tokio::time::Instant::now()) {
                    worker.metrics().event(Event::ResetFlood);
                    debug!(%peer, "too many premature stream resets: H3_EXCESSIVE_LOAD");
                    h3.close(Code::H3_EXCESSIVE_LOAD, "too many premature stream resets");
                    streams.abort_all();
                    break;
                }
            }
            // The proxy or its listener stops, or the HTTP/2 side went
            // away (idle): GOAWAY.
            _ = shutdown.wait_for(|stop| *stop), if !draining => draining = true,
            Some(_) = bridge.tasks.join_next(), if !draining => draining = true,
        }
        if draining {
            h3.goaway().await;
        }
    }
    while streams.join_next().await.is_some() {}
    bridge.close().await;
    h3.close(Code::H3_NO_ERROR, "");
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
    async fn open(peer: std::net::SocketAddr, routes: u16, worker: &Arc<Worker>) -> Option<Self> {
        let (client_io, server_io) = tokio::io::duplex(BRIDGE_BUFFER);
        let origin = ClientOrigin {
            peer,
            secure: true,
            alt_svc: None,
            h3: true,
            routes,
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
