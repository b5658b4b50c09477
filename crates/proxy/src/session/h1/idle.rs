//! The HTTP/1.1 client connection between requests: what it keeps while
//! idle (an [`Idle`]: no buffers, no request state), telling an HTTP/2
//! preface from a request, and waiting until a whole head has arrived
//! before a [`Session`] serves it (`h1/mod.rs`).

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use bytes::BytesMut;
use http1::conn::{Deadlines, ReadEnd, ReadReady, ServerConnection};
use http1::io::{preface, Preface, Prefaced};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
};
use tracing::debug;

use crate::plan::Snapshot;
use crate::session::h1::park::{ConnectionSlot, Park, Parked, PARK_AFTER};
use crate::session::{ClientOrigin, Session, Worker};
use crate::wire::proxy_protocol::Proxied;

/// A session whose client has sent nothing for this long since its last
/// bytes is put away (the connection becomes an `Idle`).
pub(in crate::session) const BUSY_LINGER: Duration = Duration::from_millis(100);

/// What an HTTP/1.1 client connection keeps between requests: no
/// buffers and no request state (see [`serve_h1`]).
pub(crate) struct Idle<S> {
    pub(in crate::session) conn: ServerConnection<S>,
    pub(in crate::session) peer: Peer,
    pub(in crate::session) secure: bool,
    /// See [`crate::session::ClientOrigin::alt_svc`].
    pub(in crate::session) alt_svc: Option<std::num::NonZeroU16>,
    /// See [`crate::session::ClientOrigin::routes`].
    pub(in crate::session) routes: u16,
    /// The client's last request came within [`BUSY_LINGER`] of the one
    /// before: its next session waits for the next request a while.
    pub(in crate::session) chatty: bool,
    pub(in crate::session) worker: Arc<Worker>,
    pub(in crate::session) plan: Arc<Snapshot>,
}

/// An idle client's address, and what its PROXY protocol header said if
/// it had one: as large as the address alone (the header's facts hold
/// the address too), so that an idle connection's future does not grow.
#[derive(Debug)]
pub(crate) enum Peer {
    Socket(SocketAddr),
    Proxied(Arc<Proxied>),
}

impl Peer {
    pub(in crate::session) fn new(peer: SocketAddr, proxied: Option<Arc<Proxied>>) -> Self {
        match proxied {
            Some(proxied) => Peer::Proxied(proxied),
            None => Peer::Socket(peer),
        }
    }

    pub(in crate::session) fn addr(&self) -> SocketAddr {
        match self {
            Peer::Socket(peer) => *peer,
            Peer::Proxied(proxied) => proxied.client,
        }
    }

    pub(in crate::session) fn proxied(&self) -> Option<Arc<Proxied>> {
        match self {
            Peer::Socket(_) => None,
            Peer::Proxied(proxied) => Some(Arc::clone(proxied)),
        }
    }
}

/// Serves a connection that opened with the HTTP/2 preface (h2c with
/// prior knowledge), the bytes read so far replayed. A function pointer
/// from the server layer, which runs HTTP/2 connections.
pub(crate) type H2c<S> = fn(
    Prefaced<S>,
    ClientOrigin,
    Arc<Worker>,
    watch::Receiver<bool>,
) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves an HTTP/1.1 client connection, whose first bytes (if any were
/// read already) are `received`, to its end; with `h2c`, a connection
/// that opens with the HTTP/2 preface goes to it instead. `slot` is
/// dropped when the connection ends.
///
/// An idle connection is its task's future, so that future holds only an
/// [`Idle`]: it waits for the client's next bytes without a buffer (see
/// `http1::conn`), and until a whole head has arrived. From then until
/// the connection is idle again, a [`Session`] (the request's state and
/// its phases' futures, a few KiB) lives on the heap. A plaintext
/// connection idle for [`PARK_AFTER`] leaves its task for the worker's
/// parking lot (`park.rs`). Not an `async fn`: that would keep its
/// arguments twice in the future.
pub(crate) fn serve_h1<S>(
    client: S,
    received: BytesMut,
    origin: ClientOrigin,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    h2c: Option<H2c<S>>,
    slot: ConnectionSlot,
) -> impl Future<Output = ()> + Send
where
    S: AsyncRead + AsyncWrite + ReadReady + Park + Unpin + Send + 'static,
{
    let plan = worker.plans.current();
    let mut idle = Idle {
        conn: ServerConnection::new(client, received, shutdown, plan.idle_timeout),
        peer: Peer::new(origin.peer, origin.proxied),
        secure: origin.secure,
        alt_svc: origin.alt_svc,
        routes: origin.routes,
        chatty: false,
        worker,
        plan,
    };
    async move {
        if let Some(h2c) = h2c {
            match idle.read_preface().await {
                Ok(false) => {}
                Err(ReadEnd::Quiet) => return idle.park(slot, true),
                Ok(true) => {
                    let (stream, read, shutdown) = idle.conn.into_parts();
                    let stream = Prefaced::new(read.freeze(), stream);
                    let origin = ClientOrigin {
                        peer: idle.peer.addr(),
                        secure: idle.secure,
                        alt_svc: idle.alt_svc,
                        h3: false,
                        routes: idle.routes,
                        proxied: idle.peer.proxied(),
                    };
                    let _slot = slot;
                    return h2c(stream, origin, idle.worker, shutdown).await;
                }
                Err(ReadEnd::Closed) => return,
                Err(_) => return idle.conn.close(false).await,
            }
        }
        let mut answered = false;
        loop {
            // A head arriving slowly (or not at all) waits here, holding
            // only its bytes: no session yet.
            while !http1::head_arrived(&idle.conn.rbuf, &idle.plan.limits) {
                let before = idle.conn.last_active();
                match idle.conn.read_until(idle.deadlines(), idle.park_at()).await {
                    // The first request has no gap to go by.
                    Ok(()) => {
                        idle.chatty = answered && idle.conn.last_active() < before + BUSY_LINGER;
                    }
                    Err(ReadEnd::Closed) => return,
                    Err(ReadEnd::Quiet) => return idle.park(slot, false),
                    Err(_) if idle.conn.rbuf.is_empty() => return idle.conn.close(false).await,
                    // A head begun and not finished in time: 408.
                    Err(end) => {
                        return Box::pin(async move { Session::resume(idle).end(end).await }).await
                    }
                }
            }
            match Box::pin(Session::resume(idle).serve()).await {
                Some(next) => idle = next,
                None => return,
            }
            answered = true;
        }
    }
}

impl<S: AsyncRead + AsyncWrite + ReadReady + Park + Unpin + Send> Idle<S> {
    fn deadlines(&self) -> Deadlines {
        Deadlines {
            idle: self.plan.idle_timeout,
            request: self.plan.header_read_timeout,
        }
    }

    /// When a connection that has read nothing since its last bytes is
    /// parked (never, for streams that are not).
    fn park_at(&self) -> Option<tokio::time::Instant> {
        S::PARKS.then(|| self.conn.last_active() + PARK_AFTER)
    }

    /// Parks the connection in the lot (see `park.rs`): its task ends,
    /// and its worker gives it a new one when the client sends again.
    /// `h2c`: nothing was read yet, so the first bytes may be the HTTP/2
    /// preface.
    fn park(self, slot: ConnectionSlot, h2c: bool) {
        let deadline = self.conn.last_active() + self.plan.idle_timeout;
        let (stream, _, shutdown) = self.conn.into_parts();
        match stream.unregister() {
            Ok(Ok(stream)) => {
                let parked = Parked {
                    stream,
                    peer: self.peer.addr(),
                    proxied: self.peer.proxied(),
                    slot,
                    deadline,
                    h2c,
                    shutdown,
                    routes: self.routes,
                };
                // Not parked (shutting down, or the socket cannot be
                // watched): it waits in a task again.
                if let Err(parked) = self.worker.parking.park(parked) {
                    self.worker.unpark(parked);
                }
            }
            Ok(Err(err)) => {
                debug!(peer = %self.peer.addr(), %err, "cannot park a connection; closed")
            }
            // Not parked: `park_at` never asks for it (dropped: closed).
            Err(_) => {}
        }
    }

    /// Reads until the buffer holds the whole HTTP/2 preface (true) or
    /// bytes that cannot begin it (false: HTTP/1.1 parses them).
    async fn read_preface(&mut self) -> Result<bool, ReadEnd> {
        loop {
            match preface(&self.conn.rbuf) {
                Preface::Complete => return Ok(true),
                Preface::Absent => return Ok(false),
                Preface::Partial => {
                    self.conn
                        .read_until(self.deadlines(), self.park_at())
                        .await?
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    fn returned<A, B, C, D, E, G, H, F: Future>(_: fn(A, B, C, D, E, G, H) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// An idle connection costs its task's future (until it is parked),
    /// which holds no request state: that lives in the boxed session while
    /// a request is served. The bound includes the connection's slot (24
    /// bytes; the test measured the future without one before parking
    /// made it a concrete type): under 672 bytes, Tokio's task cell around
    /// it is 768.
    #[test]
    fn an_idle_connection_future_stays_small() {
        let size = returned(serve_h1::<TcpStream> as fn(_, _, _, _, _, _, _) -> _);
        assert!(size <= 672, "serve_h1's future is {size} bytes");
    }
}
