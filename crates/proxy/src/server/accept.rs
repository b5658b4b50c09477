//! A worker's accept loops: one per listener, each on the worker's own
//! `SO_REUSEPORT` socket. A reload adds, changes and removes listeners
//! while the worker serves (`server/bound.rs` decides which): a removed
//! listener's socket is closed at once, so new connections are refused,
//! and its connections drain as they would at shutdown (the request in
//! flight finishes, then the connection closes).

use std::{
    collections::HashMap,
    net::{SocketAddr, TcpListener as StdListener},
    sync::Arc,
};

use arc_swap::ArcSwap;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
    time::Duration,
};
use tokio_util::task::TaskTracker;
use tracing::warn;

use super::h3::{serve_endpoint, H3Socket, QuicSource};
use super::listener::{serve_h2c, spawn_connection, Endpoint};
use super::Accepting;
use crate::session::{serve_unparked, Serving, Worker};

/// Pause after an accept error such as EMFILE, so that the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(20);

/// Names one configured listener for as long as it is open, across reloads.
pub(super) type ListenerId = u64;

/// One change to a worker's listeners.
#[derive(Debug)]
pub(super) enum ListenerChange {
    /// Accept on `socket`, this worker's own socket for the address.
    Add {
        id: ListenerId,
        socket: StdListener,
        /// This worker's UDP socket to serve HTTP/3 on.
        udp: Option<H3Socket>,
        endpoint: Arc<Endpoint>,
    },
    /// New connections are served as `endpoint` says (protocols or TLS
    /// files changed); open ones keep what they started with.
    Update {
        id: ListenerId,
        /// This worker's UDP socket of a listener that starts serving h3.
        udp: Option<H3Socket>,
        endpoint: Arc<Endpoint>,
    },
    /// Close the socket; the listener's connections drain.
    Remove { id: ListenerId },
}

/// A reload's changes for one worker; `applied` is sent once they are in
/// effect (a removed listener's socket closed), so that a reload answers
/// only when its listeners are what it says.
#[derive(Debug)]
pub(super) struct ListenerChanges {
    pub changes: Vec<ListenerChange>,
    pub applied: oneshot::Sender<()>,
}

/// One listener as a worker serves it.
#[derive(Debug)]
struct Listening {
    endpoint: ArcSwap<Endpoint>,
    /// Turns true when the listener is removed or the proxy shuts down:
    /// its connections take it as their shutdown signal. Never awaited
    /// here, so that a clone given to a connection accepted after the
    /// change still sees it.
    stopped: watch::Receiver<bool>,
}

/// An open listener: what its connections share, and its accept loop.
struct Open {
    listening: Arc<Listening>,
    stop: watch::Sender<bool>,
    accepting: JoinHandle<()>,
}

/// A client, the listener it came in by, and its connection permit.
type Accepted = (TcpStream, SocketAddr, Arc<Listening>, OwnedSemaphorePermit);

/// The worker's listeners and what their accept loops share.
struct Listeners {
    open: HashMap<ListenerId, Open>,
    accepted: mpsc::UnboundedSender<Accepted>,
    connections: Arc<Semaphore>,
    worker: Arc<Worker>,
    sessions: TaskTracker,
}

/// An h3 listener's QUIC endpoint reads the listener's current settings
/// for each new connection.
impl QuicSource for Listening {
    fn current(&self) -> Option<(Arc<quinn::ServerConfig>, crate::config::H3Settings)> {
        self.endpoint.load().tls.as_ref()?.quic()
    }

    fn routes(&self) -> u16 {
        self.endpoint.load().routes
    }
}

impl Listeners {
    fn add(
        &mut self,
        id: ListenerId,
        socket: StdListener,
        udp: Option<H3Socket>,
        endpoint: Arc<Endpoint>,
    ) {
        let socket = match TcpListener::from_std(socket) {
            Ok(socket) => socket,
            Err(err) => return warn!(%err, "cannot register a listener"),
        };
        let (stop, stopped) = watch::channel(false);
        let listening = Arc::new(Listening {
            endpoint: ArcSwap::new(endpoint),
            stopped,
        });
        let accepting = tokio::spawn(accept(
            socket,
            Arc::clone(&listening),
            Arc::clone(&self.connections),
            self.accepted.clone(),
            stop.subscribe(),
        ));
        if let Some(udp) = udp {
            self.serve_h3(udp, &listening);
        }
        self.open.insert(
            id,
            Open {
                listening,
                stop,
                accepting,
            },
        );
    }

    /// Serves HTTP/3 on `udp` while the listener is open; its
    /// connections drain with the others.
    fn serve_h3(&self, udp: H3Socket, listening: &Arc<Listening>) {
        let source: Arc<dyn QuicSource> = Arc::clone(listening) as _;
        self.sessions.spawn(serve_endpoint(
            udp,
            source,
            (Arc::clone(&self.worker), Arc::clone(&self.connections)),
            self.sessions.clone(),
            listening.stopped.clone(),
        ));
    }

    async fn apply(&mut self, change: ListenerChange) {
        match change {
            ListenerChange::Add {
                id,
                socket,
                udp,
                endpoint,
            } => self.add(id, socket, udp, endpoint),
            ListenerChange::Update { id, udp, endpoint } => {
                if let Some(open) = self.open.get(&id) {
                    open.listening.endpoint.store(endpoint);
                    if let Some(udp) = udp {
                        self.serve_h3(udp, &open.listening);
                    }
                }
            }
            ListenerChange::Remove { id } => {
                if let Some(open) = self.open.remove(&id) {
                    let _ = open.stop.send(true);
                    // The loop ends at its next poll and drops the socket.
                    let _ = open.accepting.await;
                }
            }
        }
    }
}

/// Accepts on the listeners (and those a reload adds) and runs a session
/// per client until shutdown, then drains the sessions until `deadline`.
/// A tracker, not a `JoinSet`, keeps count of the sessions: it costs a
/// connection no entry of its own.
pub(super) async fn serve(
    accepting: Accepting,
    worker: Arc<Worker>,
    mut shutdown: watch::Receiver<bool>,
    deadline: Duration,
) {
    let Accepting {
        listeners,
        mut changes,
        connections,
        unparked,
    } = accepting;
    let sessions = TaskTracker::new();
    // Idle connections leave their tasks for the parking lot and come
    // back as tasks of `sessions`, so that the drain below waits for them.
    sessions.spawn(serve_unparked(
        unparked,
        Serving {
            worker: Arc::clone(&worker),
            tasks: sessions.clone(),
            shutdown: shutdown.clone(),
            h2c: serve_h2c,
        },
    ));
    let (accepted, mut accepted_rx) = mpsc::unbounded_channel();
    let mut open = Listeners {
        open: HashMap::new(),
        accepted,
        connections,
        worker: Arc::clone(&worker),
        sessions: sessions.clone(),
    };
    for (id, socket, udp, endpoint) in listeners {
        open.add(id, socket, udp, endpoint);
    }
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            // Sessions are spawned here so that one tracker drains them all.
            Some((stream, peer, listening, permit)) = accepted_rx.recv() => {
                let endpoint = listening.endpoint.load_full();
                spawn_connection(
                    &sessions,
                    stream,
                    peer,
                    &endpoint,
                    &worker,
                    &listening.stopped,
                    permit,
                );
            }
            Some(batch) = changes.recv() => {
                for change in batch.changes {
                    open.apply(change).await;
                }
                let _ = batch.applied.send(());
            }
        }
    }
    for listener in open.open.values() {
        let _ = listener.stop.send(true);
    }
    sessions.close();
    if tokio::time::timeout(deadline, sessions.wait())
        .await
        .is_err()
    {
        warn!(
            ?deadline,
            open = sessions.len(),
            "shutdown deadline passed; closing the remaining connections"
        );
    }
}

/// Accepts until the listener stops, holding a connection permit per
/// client: at the limit, new clients wait in the kernel's backlog.
async fn accept(
    listener: TcpListener,
    listening: Arc<Listening>,
    connections: Arc<Semaphore>,
    sessions: mpsc::UnboundedSender<Accepted>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let permit = tokio::select! {
            biased;
            _ = stop.changed() => return,
            permit = Arc::clone(&connections).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Small answers must not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    let listening = Arc::clone(&listening);
                    if sessions.send((stream, peer, listening, permit)).is_err() {
                        return;
                    }
                }
                Err(err) => {
                    warn!(%err, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
    }
}
