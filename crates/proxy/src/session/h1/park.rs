//! Parked connections: a plaintext HTTP/1.1 client connection that has
//! sent nothing for [`PARK_AFTER`] gives up its task, its timer and its
//! registration with Tokio's reactor, and waits as a bare socket in its
//! process's [`ParkingLot`] (about a hundred bytes, where a waiting task
//! costs about 1.4 KB). When bytes (or a close) arrive it gets a task
//! again; when its idle deadline passes, or on shutdown, it is closed.
//!
//! The lot watches its sockets with an epoll set of its own (`mio::Poll`)
//! from a thread of its own, one for the process: parking a connection is
//! an `epoll_ctl` and a lock no request path takes; waking one is an
//! `epoll_ctl` and a message to its worker, which gives it a task. Only
//! connections that were idle for a second pay either.
//! nginx keeps an idle keep-alive connection for about 0.8 KB and HAProxy
//! for about 1.2 KB (docs/PERFORMANCE.md, "Memory per idle connection").

use std::{
    io,
    net::{Shutdown, SocketAddr},
    os::fd::AsRawFd,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use bytes::BytesMut;
use mio::{unix::SourceFd, Events, Interest, Poll, Registry, Token, Waker};
use tokio::{
    net::TcpStream,
    sync::{mpsc, watch},
    time::Instant,
};
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::session::{serve_h1, ClientOrigin, H2c, Worker};

/// An HTTP/1.1 client connection idle this long is parked. Clients that
/// send more often (a busy keep-alive client, a load balancer's
/// connections at a few requests a second each) keep their task and pay
/// nothing for parking.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);
/// How often parked connections' idle deadlines are checked: a parked
/// connection is closed at most this long after its deadline.
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// Readiness events taken from the lot's epoll set per wait.
const EVENTS: usize = 256;

/// A client connection's place in its worker while it is open: the
/// permit that counts it against `limits.max_connections`, and its share
/// of the open-connections gauge.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    _permit: tokio::sync::OwnedSemaphorePermit,
    worker: Arc<Worker>,
}

impl ConnectionSlot {
    pub(crate) fn new(permit: tokio::sync::OwnedSemaphorePermit, worker: &Arc<Worker>) -> Self {
        worker.metrics().connection_opened();
        Self {
            _permit: permit,
            worker: Arc::clone(worker),
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.worker.metrics().connection_closed();
    }
}

/// A stream a connection can be parked with: a plaintext TCP stream
/// leaves Tokio's reactor as a bare socket; a TLS stream (whose session
/// state would have to be kept) is never parked.
pub(crate) trait Park: Sized {
    /// Whether connections on this kind of stream are parked.
    const PARKS: bool;

    /// The socket, deregistered from Tokio's reactor; the stream back if
    /// it is not parked.
    fn unregister(self) -> Result<io::Result<std::net::TcpStream>, Self>;
}

impl Park for TcpStream {
    const PARKS: bool = true;

    fn unregister(self) -> Result<io::Result<std::net::TcpStream>, Self> {
        Ok(self.into_std())
    }
}

impl<S> Park for tls::tokio_rustls::server::TlsStream<S> {
    const PARKS: bool = false;

    fn unregister(self) -> Result<io::Result<std::net::TcpStream>, Self> {
        Err(self)
    }
}

/// A parked connection: everything it needs to be served again.
#[derive(Debug)]
pub(crate) struct Parked {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    /// What its PROXY protocol header said (`ClientOrigin::proxied`).
    pub proxied: Option<Arc<crate::wire::proxy_protocol::Proxied>>,
    pub slot: ConnectionSlot,
    /// Closed if nothing arrives by then (its idle timeout).
    pub deadline: Instant,
    /// Nothing was read yet: the first bytes may be the HTTP/2 preface.
    pub h2c: bool,
    /// Its listener's stop signal (removed by a reload, or shutdown): a
    /// parked connection closes when it turns true, as an idle one does.
    pub shutdown: watch::Receiver<bool>,
    /// See [`crate::session::ClientOrigin::routes`].
    pub routes: u16,
}

/// The token of the lot's own waker (connections' tokens have a use
/// count of at least 1 in their high half, so never this).
const STOP: Token = Token(0);

/// Where the process's idle plaintext HTTP/1.1 client connections wait,
/// shared by the workers (which park) and the lot's thread ([`run`],
/// which wakes and expires).
#[derive(Debug)]
pub(crate) struct ParkingLot {
    registry: Registry,
    lot: Mutex<Lot>,
    waker: Waker,
    stopped: AtomicBool,
}

impl ParkingLot {
    /// A lot, and the epoll set that its thread ([`run`]) waits on.
    pub(crate) fn new() -> io::Result<(Arc<Self>, Poll)> {
        let poll = Poll::new()?;
        let lot = Self {
            registry: poll.registry().try_clone()?,
            lot: Mutex::new(Lot::default()),
            waker: Waker::new(poll.registry(), STOP)?,
            stopped: AtomicBool::new(false),
        };
        Ok((Arc::new(lot), poll))
    }

    /// Parks `parked`; it back if it cannot be (the lot stopped, or the
    /// socket cannot be watched).
    pub(crate) fn park(&self, parked: Parked) -> Result<(), Parked> {
        if self.stopped.load(Ordering::Relaxed) {
            return Err(parked);
        }
        let Ok(mut lot) = self.lot.lock() else {
            return Err(parked);
        };
        lot.insert(parked, &self.registry)
    }

    /// Makes [`run`] close every parked connection and return.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Err(err) = self.waker.wake() {
            warn!(%err, "cannot wake the parking lot to stop it");
        }
    }

    fn remove(&self, index: u32, uses: Option<u32>) -> Option<Parked> {
        let mut lot = self.lot.lock().ok()?;
        lot.remove(index, uses, &self.registry)
    }
}

/// The parking lot's thread: gives a connection whose client sent
/// something (or closed) back to its worker, closes those whose idle
/// deadline passed or whose listener stopped, and closes all of them
/// when stopped.
pub(crate) fn run(parking: &ParkingLot, mut poll: Poll) {
    let mut events = Events::with_capacity(EVENTS);
    let mut swept = Instant::now();
    loop {
        if let Err(err) = poll.poll(&mut events, Some(SWEEP_EVERY)) {
            if err.kind() != io::ErrorKind::Interrupted {
                warn!(%err, "the parking lot cannot wait; its connections are closed");
                parking.stopped.store(true, Ordering::Relaxed);
            }
        }
        if parking.stopped.load(Ordering::Relaxed) {
            let parked = match parking.lot.lock() {
                Ok(mut lot) => lot.take_where(|_| true, &parking.registry),
                Err(_) => Vec::new(),
            };
            parked.into_iter().for_each(close);
            return;
        }
        for event in events.iter() {
            let Token(token) = event.token();
            let (index, uses) = ((token & 0xffff_ffff) as u32, (token >> 32) as u32);
            if let Some(parked) = parking.remove(index, Some(uses)) {
                let worker = Arc::clone(&parked.slot.worker);
                worker.unpark(parked);
            }
        }
        let now = Instant::now();
        if now >= swept + SWEEP_EVERY {
            swept = now;
            let expired = match parking.lot.lock() {
                // Past its idle deadline, or its listener stopped.
                Ok(mut lot) => lot.take_where(
                    |parked| parked.deadline <= now || *parked.shutdown.borrow(),
                    &parking.registry,
                ),
                Err(_) => Vec::new(),
            };
            expired.into_iter().for_each(close);
        }
    }
}

/// What a worker serves the connections woken for it with.
#[derive(Debug)]
pub(crate) struct Serving {
    pub worker: Arc<Worker>,
    pub tasks: TaskTracker,
    pub shutdown: watch::Receiver<bool>,
    /// How a plaintext connection that opens with the HTTP/2 preface is
    /// served (when its listener speaks h2c).
    pub h2c: H2c<TcpStream>,
}

/// A worker's side of the lot: serves each connection woken for it in a
/// task again, until shutdown (then they are closed).
pub(crate) async fn serve_unparked(mut woken: mpsc::UnboundedReceiver<Parked>, serving: Serving) {
    let mut shutdown = serving.shutdown.clone();
    loop {
        let parked = tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    woken.close();
                    while let Ok(parked) = woken.try_recv() {
                        close(parked);
                    }
                    return;
                }
                continue;
            }
            parked = woken.recv() => match parked {
                Some(parked) => parked,
                None => return,
            },
        };
        let stream = match TcpStream::from_std(parked.stream) {
            Ok(stream) => stream,
            Err(err) => {
                debug!(peer = %parked.peer, %err, "cannot serve a parked connection again");
                continue;
            }
        };
        let origin = ClientOrigin {
            peer: parked.peer,
            secure: false,
            alt_svc: None,
            h3: false,
            routes: parked.routes,
            proxied: parked.proxied,
        };
        serving.tasks.spawn(serve_h1(
            stream,
            BytesMut::new(),
            origin,
            Arc::clone(&serving.worker),
            parked.shutdown,
            parked.h2c.then_some(serving.h2c),
            parked.slot,
        ));
    }
}

/// The parked connections, by token (`index` in the low half of a
/// token, the slot's use count in the high half, so that an event for a
/// connection that left cannot wake the next one in its slot).
#[derive(Debug, Default)]
struct Lot {
    slots: Vec<(u32, Option<Parked>)>,
    free: Vec<u32>,
}

impl Lot {
    /// Watches `parked` for readability; it back if it cannot be watched.
    fn insert(&mut self, parked: Parked, registry: &Registry) -> Result<(), Parked> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => match u32::try_from(self.slots.len()) {
                Ok(index) => {
                    self.slots.push((0, None));
                    index
                }
                Err(_) => return Err(parked),
            },
        };
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Err(parked);
        };
        slot.0 = slot.0.wrapping_add(1).max(1);
        let token = Token((slot.0 as usize) << 32 | index as usize);
        let fd = parked.stream.as_raw_fd();
        // Edge-triggered: bytes that arrived before this call are reported
        // by it, so none is missed between leaving Tokio and arriving here.
        if let Err(err) = registry.register(&mut SourceFd(&fd), token, Interest::READABLE) {
            debug!(%err, "cannot park a connection");
            self.free.push(index);
            return Err(parked);
        }
        parked.slot.worker.metrics().connections_parked(1);
        slot.1 = Some(parked);
        Ok(())
    }

    /// Takes the connection in slot `index` out of the epoll set (if the
    /// slot's use count is `uses`, when given).
    fn remove(&mut self, index: u32, uses: Option<u32>, registry: &Registry) -> Option<Parked> {
        let slot = self.slots.get_mut(index as usize)?;
        if uses.is_some_and(|uses| uses != slot.0) {
            return None;
        }
        let parked = slot.1.take()?;
        let fd = parked.stream.as_raw_fd();
        let _ = registry.deregister(&mut SourceFd(&fd));
        self.free.push(index);
        parked.slot.worker.metrics().connections_parked(-1);
        Some(parked)
    }

    /// Takes out the connections `due` picks, in one pass over the slots.
    fn take_where(&mut self, due: impl Fn(&Parked) -> bool, registry: &Registry) -> Vec<Parked> {
        let mut taken = Vec::new();
        for index in 0..self.slots.len() {
            if !self.slots[index].1.as_ref().is_some_and(&due) {
                continue;
            }
            let parked = u32::try_from(index)
                .ok()
                .and_then(|index| self.remove(index, None, registry));
            taken.extend(parked);
        }
        taken
    }
}

/// Closes an idle connection as an unparked one is closed (a FIN, no
/// answer: nothing was asked).
fn close(parked: Parked) {
    let _ = parked.stream.shutdown(Shutdown::Write);
}
