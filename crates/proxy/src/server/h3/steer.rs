//! HTTP/3 on every worker. Each worker's QUIC endpoint has a UDP socket
//! of its own on the listener's address (`SO_REUSEPORT`: the kernel
//! spreads clients over them by address), and every connection ID an
//! endpoint issues names its worker ([`WorkerCids`]). A client whose
//! address changes (a NAT rebinding, a migration: RFC 9000 9) may then
//! land on another worker's socket; that worker hands each such datagram
//! to the worker named by its connection ID ([`Steered`]), so the
//! connection stays with the endpoint that holds it. Long-header packets
//! (the handshake: a client may not migrate before it is confirmed, RFC
//! 9000 9) carry IDs the client chose and stay where they land.

use std::{
    fmt,
    hash::{BuildHasher, RandomState},
    io::{self, IoSliceMut},
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use quinn::{
    udp::{RecvMeta, Transmit},
    AsyncUdpSocket, ConnectionIdGenerator, UdpPoller,
};
use ring::rand::{SecureRandom, SystemRandom};
use tokio::sync::mpsc;

use crate::session::Worker;

/// The length of the connection IDs the endpoints issue (quinn's own).
const CID_LEN: usize = 8;
/// Datagrams one worker may have waiting for another: past it they are
/// dropped, as a full socket buffer drops them (QUIC recovers).
const INBOX: usize = 1024;

/// A datagram received by one worker for another, with what the socket
/// said of it.
pub(crate) struct Datagram {
    data: Vec<u8>,
    meta: RecvMeta,
}

/// What the endpoints of one listener share: the key that hides the
/// worker in a connection ID, and each worker's inbox.
pub(crate) struct Steering {
    key: RandomState,
    inboxes: Vec<mpsc::Sender<Datagram>>,
}

impl fmt::Debug for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Steering({} workers)", self.inboxes.len())
    }
}

/// One worker's part of a listener's steering: its index and its inbox.
#[derive(Debug)]
pub(crate) struct WorkerSteering {
    pub steering: Arc<Steering>,
    pub worker: usize,
    pub inbox: mpsc::Receiver<Datagram>,
}

/// The steering of a listener served by `workers` workers, one part each.
pub(crate) fn steering(workers: usize) -> Vec<WorkerSteering> {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::channel(INBOX)).unzip();
    let steering = Arc::new(Steering {
        key: RandomState::new(),
        inboxes: senders,
    });
    receivers
        .into_iter()
        .enumerate()
        .map(|(worker, inbox)| WorkerSteering {
            steering: Arc::clone(&steering),
            worker,
            inbox,
        })
        .collect()
}

impl Steering {
    /// The byte that, in front of `rest`, names `worker`: its index plus
    /// a keyed hash of the rest, so that to anyone without the key the
    /// byte is as random as the others (RFC 9000 5.1: IDs must not be
    /// linkable).
    fn mask(&self, rest: &[u8]) -> u8 {
        self.key.hash_one(rest) as u8
    }

    /// The worker a short-header packet's connection ID names, if it is
    /// one of this listener's.
    fn owner(&self, packet: &[u8]) -> Option<usize> {
        let first = *packet.first()?;
        // Long header (0x80): the handshake, or a version negotiation.
        if first & 0x80 != 0 || packet.len() < 1 + CID_LEN {
            return None;
        }
        let cid = &packet[1..=CID_LEN];
        let worker = usize::from(cid[0].wrapping_sub(self.mask(&cid[1..])));
        (worker < self.inboxes.len()).then_some(worker)
    }
}

/// Connection IDs that name their worker (see [`Steering::mask`]).
pub(crate) struct WorkerCids {
    steering: Arc<Steering>,
    worker: u8,
    random: SystemRandom,
}

impl WorkerCids {
    pub(crate) fn new(steering: Arc<Steering>, worker: usize) -> Self {
        Self {
            steering,
            worker: u8::try_from(worker).unwrap_or(u8::MAX),
            random: SystemRandom::new(),
        }
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> quinn::ConnectionId {
        let mut cid = [0u8; CID_LEN];
        // The system's generator does not fail on Linux; a failure would
        // leave zeros, still naming the worker.
        let _ = self.random.fill(&mut cid[1..]);
        cid[0] = self.worker.wrapping_add(self.steering.mask(&cid[1..]));
        quinn::ConnectionId::new(&cid)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// A worker's UDP socket as its endpoint reads it: datagrams for another
/// worker's connections go to that worker; those other workers received
/// for this one come in with the socket's own.
pub(crate) struct Steered {
    socket: Arc<dyn AsyncUdpSocket>,
    steering: Arc<Steering>,
    /// This worker's index among the listener's.
    me: usize,
    inbox: Mutex<mpsc::Receiver<Datagram>>,
    worker: Arc<Worker>,
}

impl fmt::Debug for Steered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Steered(worker {})", self.me)
    }
}

impl Steered {
    pub(crate) fn new(
        socket: Arc<dyn AsyncUdpSocket>,
        part: WorkerSteering,
        worker: Arc<Worker>,
    ) -> Self {
        Self {
            socket,
            steering: part.steering,
            me: part.worker,
            inbox: Mutex::new(part.inbox),
            worker,
        }
    }

    /// Hands `data` to the worker that owns it, unless that is this one.
    fn handed_on(&self, data: &[u8], meta: &RecvMeta) -> bool {
        let Some(owner) = self.steering.owner(data) else {
            return false;
        };
        if owner == self.me {
            return false;
        }
        let datagram = Datagram {
            data: data.to_vec(),
            meta: *meta,
        };
        // A full or closed inbox drops it, as a full socket would.
        let _ = self.steering.inboxes[owner].try_send(datagram);
        self.worker.metrics().h3_datagram_steered();
        true
    }

    /// A datagram another worker handed to this one, if any.
    fn poll_inbox(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<usize> {
        let mut inbox = self
            .inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Poll::Ready(Some(datagram)) = inbox.poll_recv(cx) else {
            return Poll::Pending;
        };
        let (Some(buf), Some(slot)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Pending;
        };
        let len = datagram.data.len().min(buf.len());
        buf[..len].copy_from_slice(&datagram.data[..len]);
        *slot = RecvMeta {
            len,
            stride: datagram.meta.stride.min(len),
            ..datagram.meta
        };
        Poll::Ready(1)
    }
}

impl AsyncUdpSocket for Steered {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Arc::clone(&self.socket).create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.socket.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if let Poll::Ready(n) = self.poll_inbox(cx, bufs, meta) {
            return Poll::Ready(Ok(n));
        }
        loop {
            let n = match self.socket.poll_recv(cx, bufs, meta) {
                Poll::Ready(Ok(n)) => n,
                other => return other,
            };
            // The datagrams that stay, moved to the front in order. The
            // segments of one buffer (GRO) share their source address, so
            // the first names the connection of all of them.
            let mut kept = 0;
            for i in 0..n {
                let len = meta[i].len;
                if self.handed_on(&bufs[i][..len], &meta[i]) {
                    continue;
                }
                if kept != i {
                    let (front, back) = bufs.split_at_mut(i);
                    front[kept][..len].copy_from_slice(&back[0][..len]);
                    meta[kept] = meta[i];
                }
                kept += 1;
            }
            if kept > 0 {
                return Poll::Ready(Ok(kept));
            }
            // All handed on: read again, until the socket has nothing.
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.socket.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.socket.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.socket.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_finds_its_own_ids_and_none_of_them_repeat_a_byte() {
        let parts = steering(3);
        let steering = Arc::clone(&parts[0].steering);
        for worker in 0..3 {
            let mut cids = WorkerCids::new(Arc::clone(&steering), worker);
            let mut firsts = std::collections::HashSet::new();
            for _ in 0..64 {
                let cid = cids.generate_cid();
                assert_eq!(cid.len(), CID_LEN);
                let mut packet = vec![0x40];
                packet.extend_from_slice(&cid);
                packet.extend_from_slice(&[0; 20]);
                assert_eq!(steering.owner(&packet), Some(worker));
                firsts.insert(cid[0]);
            }
            // The byte that names the worker is not a constant.
            assert!(firsts.len() > 16, "worker {worker}: {firsts:?}");
        }
    }

    #[test]
    fn long_headers_and_short_packets_stay_where_they_land() {
        let parts = steering(2);
        let steering = &parts[0].steering;
        let mut cids = WorkerCids::new(Arc::clone(steering), 1);
        let cid = cids.generate_cid();
        let mut long = vec![0xc0, 0, 0, 0, 1, 8];
        long.extend_from_slice(&cid);
        assert_eq!(steering.owner(&long), None);
        assert_eq!(steering.owner(&[0x40, 1, 2]), None);
        assert_eq!(steering.owner(&[]), None);
    }
}
