//! The listeners the proxy has bound, and how a reload changes them.
//!
//! Each configured listener is bound once per worker (`SO_REUSEPORT`: the
//! kernel spreads connections across the workers' sockets). A reload
//! compares the new file's listeners with the open ones, by address:
//! - a new address is bound for every worker *before* the new plan is
//!   served, so that a port in use fails the reload and changes nothing;
//! - an address whose settings changed (protocols, TLS files or policy) keeps its
//!   sockets, and its new connections are served with the new settings;
//! - an address no longer listed is closed on every worker, and its
//!   connections drain.
//!
//! Listeners with port 0 are matched by their place among the listeners
//! of the same address, so that a reload does not move them to another port.

use std::{
    net::{SocketAddr, TcpListener as StdListener},
    num::NonZeroU16,
    sync::Arc,
};

use anyhow::Context;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::{
    accept::{ListenerChange, ListenerChanges, ListenerId},
    h3::{self, H3Socket},
    listener::{Endpoint, TlsListener},
};
use crate::config::{Config, HttpVersion, ListenerSettings};

/// What identifies a configured listener across reloads: its address,
/// and its place among the listeners of that address (only port 0 repeats).
type Key = (SocketAddr, usize);

/// One open listener.
#[derive(Debug)]
struct OpenListener {
    id: ListenerId,
    key: Key,
    /// Its settings, as compared between reloads.
    settings: String,
    bound: SocketAddr,
    endpoint: Arc<Endpoint>,
}

/// The open listeners, and the channels to each worker's accept loops.
#[derive(Debug)]
pub(super) struct Bound {
    open: Vec<OpenListener>,
    workers: Vec<mpsc::UnboundedSender<ListenerChanges>>,
    next_id: ListenerId,
}

/// What each worker starts accepting on: its TCP socket for each
/// listener, and for an h3 listener its UDP socket too (one QUIC endpoint
/// per worker; a connection's packets reach the endpoint that knows it
/// whatever their source address, `server/h3/steer.rs`).
pub(super) type WorkerSockets = Vec<(ListenerId, StdListener, Option<H3Socket>, Arc<Endpoint>)>;

/// A reload's listeners, bound and read, not yet in use.
#[derive(Debug)]
pub(super) struct Prepared {
    open: Vec<OpenListener>,
    per_worker: Vec<Vec<ListenerChange>>,
    /// What the log says about the change.
    added: Vec<SocketAddr>,
    changed: Vec<SocketAddr>,
    removed: Vec<SocketAddr>,
}

impl Bound {
    /// Binds every listener of `config` for each of `workers`, with the
    /// `endpoints` read for them (in the same order). Returns the set
    /// (without worker channels yet) and each worker's sockets.
    pub(super) fn bind(
        config: &Config,
        endpoints: Vec<Endpoint>,
        workers: usize,
    ) -> anyhow::Result<(Self, Vec<WorkerSockets>)> {
        let mut bound = Self {
            open: Vec::new(),
            workers: Vec::new(),
            next_id: 0,
        };
        let mut per_worker: Vec<WorkerSockets> = (0..workers).map(|_| Vec::new()).collect();
        for ((listener, key), mut endpoint) in keyed(config)?.into_iter().zip(endpoints) {
            let (address, sockets) = bind_per_worker(key.0, workers)?;
            let udp = bind_udp(&mut endpoint, address, workers)?;
            let open = bound.opened(listener, key, address, Arc::new(endpoint));
            for ((mine, socket), udp) in per_worker.iter_mut().zip(sockets).zip(udp) {
                mine.push((open.id, socket, udp, Arc::clone(&open.endpoint)));
            }
            bound.open.push(open);
        }
        Ok((bound, per_worker))
    }

    /// Where each worker's accept loops take changes from.
    pub(super) fn connect(&mut self, workers: Vec<mpsc::UnboundedSender<ListenerChanges>>) {
        self.workers = workers;
    }

    /// The bound addresses, in configuration order (real ports for port 0).
    pub(super) fn addresses(&self) -> Vec<SocketAddr> {
        self.open.iter().map(|open| open.bound).collect()
    }

    /// The TLS listeners, whose files every reload reads again.
    pub(super) fn tls(&self) -> impl Iterator<Item = &Arc<TlsListener>> {
        self.open
            .iter()
            .filter_map(|open| open.endpoint.tls.as_ref())
    }

    fn opened(
        &mut self,
        listener: &ListenerSettings,
        key: Key,
        bound: SocketAddr,
        endpoint: Arc<Endpoint>,
    ) -> OpenListener {
        adopt_acme(listener, &endpoint);
        self.next_id += 1;
        OpenListener {
            id: self.next_id,
            key,
            settings: settings(listener),
            bound,
            endpoint,
        }
    }

    /// Binds what `config` adds and reads what it changes, with `endpoints`
    /// read for each of its listeners; nothing changes for the workers
    /// until [`Bound::commit`]. Fails on a port that cannot be bound.
    pub(super) fn prepare(
        &mut self,
        config: &Config,
        endpoints: Vec<Endpoint>,
    ) -> anyhow::Result<Prepared> {
        let workers = self.workers.len().max(1);
        let mut prepared = Prepared {
            open: Vec::new(),
            per_worker: (0..workers).map(|_| Vec::new()).collect(),
            added: Vec::new(),
            changed: Vec::new(),
            removed: Vec::new(),
        };
        for ((listener, key), mut endpoint) in keyed(config)?.into_iter().zip(endpoints) {
            let Some(old) = self.open.iter().find(|open| open.key == key) else {
                let (address, sockets) = bind_per_worker(key.0, workers)?;
                let udp = bind_udp(&mut endpoint, address, workers)?;
                let open = self.opened(listener, key, address, Arc::new(endpoint));
                let mine = prepared.per_worker.iter_mut().zip(sockets).zip(udp);
                for ((changes, socket), udp) in mine {
                    changes.push(ListenerChange::Add {
                        id: open.id,
                        socket,
                        udp,
                        endpoint: Arc::clone(&open.endpoint),
                    });
                }
                prepared.added.push(address);
                prepared.open.push(open);
                continue;
            };
            let settings = settings(listener);
            let endpoint = if settings == old.settings {
                Arc::clone(&old.endpoint)
            } else {
                // An h3 listener keeps its UDP endpoint (its new
                // connections read the new settings); one that starts
                // serving h3 binds it now.
                let udp = match old.endpoint.alt_svc {
                    Some(port) if endpoint.versions.contains(&HttpVersion::H3) => {
                        endpoint.alt_svc = Some(port);
                        (0..workers).map(|_| None).collect()
                    }
                    _ => bind_udp(&mut endpoint, old.bound, workers)?,
                };
                let endpoint = Arc::new(endpoint);
                adopt_acme(listener, &endpoint);
                for (changes, udp) in prepared.per_worker.iter_mut().zip(udp) {
                    changes.push(ListenerChange::Update {
                        id: old.id,
                        udp,
                        endpoint: Arc::clone(&endpoint),
                    });
                }
                prepared.changed.push(old.bound);
                endpoint
            };
            prepared.open.push(OpenListener {
                id: old.id,
                key,
                settings,
                bound: old.bound,
                endpoint,
            });
        }
        for old in &self.open {
            if !prepared.open.iter().any(|open| open.id == old.id) {
                for changes in &mut prepared.per_worker {
                    changes.push(ListenerChange::Remove { id: old.id });
                }
                prepared.removed.push(old.bound);
            }
        }
        Ok(prepared)
    }

    /// Hands the prepared changes to the workers and waits until each has
    /// applied them (removed sockets closed).
    pub(super) async fn commit(&mut self, prepared: Prepared) {
        let Prepared {
            open,
            per_worker,
            added,
            changed,
            removed,
        } = prepared;
        self.open = open;
        if added.is_empty() && changed.is_empty() && removed.is_empty() {
            return;
        }
        let mut applied = Vec::new();
        for (worker, changes) in self.workers.iter().zip(per_worker) {
            let (done, waiting) = oneshot::channel();
            if worker
                .send(ListenerChanges {
                    changes,
                    applied: done,
                })
                .is_ok()
            {
                applied.push(waiting);
            } else {
                warn!("a worker is gone; its listeners did not change");
            }
        }
        for waiting in applied {
            let _ = waiting.await;
        }
        info!(?added, ?changed, ?removed, "listeners changed");
    }
}

/// The listeners of `config` with their keys.
fn keyed(config: &Config) -> anyhow::Result<Vec<(&ListenerSettings, Key)>> {
    let mut keyed: Vec<(&ListenerSettings, Key)> = Vec::new();
    for listener in &config.listeners {
        let address: SocketAddr = listener.address.value.parse()?;
        let nth = keyed.iter().filter(|(_, key)| key.0 == address).count();
        keyed.push((listener, (address, nth)));
    }
    Ok(keyed)
}

/// Starts the ACME thread of a TLS listener with `tls.acme` that is
/// being put to use (it ends with the listener); a failure is logged, and
/// the listener serves the files it has.
fn adopt_acme(listener: &ListenerSettings, endpoint: &Endpoint) {
    let (Some(settings), Some(tls)) = (
        listener.tls.as_ref().and_then(|tls| tls.acme.clone()),
        endpoint.tls.as_ref(),
    ) else {
        return;
    };
    if let Err(err) = super::acme::start(tls, settings) {
        tracing::warn!("ACME: not started: {err:#}");
    }
}

/// A listener's settings, as compared between reloads.
fn settings(listener: &ListenerSettings) -> String {
    let tls = listener.tls.as_ref().map(|tls| {
        (
            &tls.cert.value,
            &tls.key.value,
            tls.client_ca.as_ref().map(|ca| &ca.value),
            tls.handshake_timeout,
            tls.policy(),
            &tls.acme,
        )
    });
    format!(
        "{:?} {tls:?} {:?} {:?}",
        listener.protocols, listener.h3, listener.proxy_protocol
    )
}

/// Binds the UDP sockets of a listener that serves h3, one per worker
/// (`SO_REUSEPORT`), at the address (and port) its TCP sockets are bound
/// to, and has its responses advertise it; `None` for each worker of a
/// listener without h3.
fn bind_udp(
    endpoint: &mut Endpoint,
    bound: SocketAddr,
    workers: usize,
) -> anyhow::Result<Vec<Option<H3Socket>>> {
    if !endpoint.versions.contains(&HttpVersion::H3) {
        return Ok((0..workers).map(|_| None).collect());
    }
    let steering = h3::steering(workers);
    let mut sockets = Vec::with_capacity(workers);
    for part in steering {
        let socket = h3::bind_udp_shared(bound)
            .with_context(|| format!("cannot listen on {bound} (UDP, h3)"))?;
        sockets.push(Some(H3Socket { socket, part }));
    }
    endpoint.alt_svc = NonZeroU16::new(bound.port());
    Ok(sockets)
}

/// Binds `wanted` once per worker: the first socket picks the port when
/// `wanted` asks for port 0, the others share it (`SO_REUSEPORT`).
fn bind_per_worker(
    wanted: SocketAddr,
    workers: usize,
) -> anyhow::Result<(SocketAddr, Vec<StdListener>)> {
    let first =
        http1::io::bind_shared(wanted).with_context(|| format!("cannot listen on {wanted}"))?;
    let bound = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..workers {
        sockets.push(
            http1::io::bind_shared(bound).with_context(|| format!("cannot listen on {bound}"))?,
        );
    }
    Ok((bound, sockets))
}
