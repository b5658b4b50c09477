//! One client connection: connect, send, read, time each request, reconnect.
//!
//! Closed model: send `pipeline` requests in one write, wait for all their
//! responses (each timed from that write to its own arrival), repeat. Open
//! model: request k of
//! this connection is due at `first + k * interval`; it is sent when due and
//! a slot is free, and its latency counts from when it was due, so a stalled
//! server cannot hide its stall by slowing the client (coordinated omission).

use std::{
    cell::RefCell,
    collections::VecDeque,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    rc::Rc,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    sync::watch,
    time::{sleep_until, Instant, Sleep},
};
use tokio_rustls::TlsConnector;

use crate::{
    response::ResponseReader,
    stats::{ErrorKind, Stats},
};

/// Pause before reconnecting after a failed connect.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);
const READ_RESERVE: usize = 64 * 1024;

/// One request of the rotation, ready to write.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub bytes: Bytes,
    pub head: bool,
}

/// What all connections of a run share.
pub(crate) struct Shared {
    pub addr: SocketAddr,
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    pub requests: Vec<Prepared>,
    pub pipeline: usize,
    pub timeout: Duration,
    /// Requests still allowed to start (`-n`); `None` for a timed run.
    pub budget: Option<AtomicU64>,
    /// `-n` as configured: the run ends when this many are answered or lost.
    pub total: Option<u64>,
    /// Requests answered or lost, for ending a `-n` run.
    pub finished: AtomicU64,
    pub stopped: AtomicBool,
    /// When the stop was requested, the end of the measured time.
    pub stopped_at: OnceLock<Instant>,
    pub stop: watch::Sender<bool>,
}

impl Shared {
    pub(crate) fn request_stop(&self) {
        self.stopped_at.get_or_init(Instant::now);
        self.stopped.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
    }

    fn stopping(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    fn take_permit(&self) -> bool {
        match &self.budget {
            None => true,
            Some(budget) => budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(1)
                })
                .is_ok(),
        }
    }

    /// Counts answered or lost requests; ends a `-n` run when all are done.
    fn finish(&self, count: u64) {
        if let Some(total) = self.total {
            if count > 0 && self.finished.fetch_add(count, Ordering::Relaxed) + count >= total {
                self.request_stop();
            }
        }
    }
}

/// The open model's timetable for one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    pub next: Instant,
    pub interval: Duration,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    intended: Instant,
    sent: Instant,
    head: bool,
}

/// How a session on one TCP connection ended.
enum SessionEnd {
    Stop,
    /// The server closed or asked to close; open another connection.
    Reconnect,
    Failed(ErrorKind),
}

/// A connection's state across reconnects.
pub(crate) struct Client {
    shared: Arc<Shared>,
    stats: Rc<RefCell<Stats>>,
    progress: Arc<AtomicU64>,
    next_request: usize,
    schedule: Option<Schedule>,
    stop_signal: Pin<Box<dyn Future<Output = ()>>>,
    timer: Pin<Box<Sleep>>,
    send_timer: Pin<Box<Sleep>>,
    in_flight: VecDeque<InFlight>,
}

impl Client {
    pub(crate) fn new(
        shared: Arc<Shared>,
        stats: Rc<RefCell<Stats>>,
        progress: Arc<AtomicU64>,
        index: usize,
        schedule: Option<Schedule>,
    ) -> Self {
        let mut stop = shared.stop.subscribe();
        let now = Instant::now();
        Self {
            next_request: index % shared.requests.len(),
            shared,
            stats,
            progress,
            schedule,
            stop_signal: Box::pin(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            }),
            timer: Box::pin(sleep_until(now + Duration::from_secs(3600))),
            send_timer: Box::pin(sleep_until(now)),
            in_flight: VecDeque::new(),
        }
    }

    /// How far behind its timetable this connection is at `now` (open model).
    pub(crate) fn lag(&self, now: Instant) -> Duration {
        self.schedule
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s.next))
    }

    /// Runs until the run stops.
    pub(crate) async fn run(&mut self) {
        while !self.shared.stopping() {
            let end = match self.connect().await {
                Ok(Some(Stream::Plain(tcp))) => self.session(tcp).await,
                Ok(Some(Stream::Tls(tls))) => self.session(*tls).await,
                Ok(None) => SessionEnd::Stop,
                Err(()) => {
                    self.record_error(ErrorKind::Connect);
                    // A `-n` run against a dead target must end: each failed
                    // connect uses up one request.
                    if self.shared.total.is_some() && self.shared.take_permit() {
                        self.shared.finish(1);
                    }
                    let pause = tokio::time::sleep(RECONNECT_PAUSE);
                    tokio::select! {
                        () = pause => {}
                        () = self.stop_signal.as_mut() => {}
                    }
                    continue;
                }
            };
            let lost = self.in_flight.len() as u64;
            self.in_flight.clear();
            match end {
                SessionEnd::Stop => return,
                // The server closed with pipelined requests unanswered.
                SessionEnd::Reconnect if lost > 0 => self.record_error(ErrorKind::Read),
                SessionEnd::Reconnect => {}
                SessionEnd::Failed(ErrorKind::Timeout) => {
                    for _ in 0..lost {
                        self.record_error(ErrorKind::Timeout);
                    }
                }
                SessionEnd::Failed(kind) => self.record_error(kind),
            }
            self.shared.finish(lost);
        }
    }

    fn record_error(&self, kind: ErrorKind) {
        self.stats.borrow_mut().error(kind, Instant::now());
    }

    /// `Ok(None)` if the run stopped while connecting.
    async fn connect(&mut self) -> Result<Option<Stream>, ()> {
        let shared = Arc::clone(&self.shared);
        let connecting = async move {
            let tcp = TcpStream::connect(shared.addr).await.map_err(|_| ())?;
            let _ = tcp.set_nodelay(true);
            match &shared.tls {
                None => Ok(Stream::Plain(tcp)),
                Some((connector, name)) => connector
                    .connect(name.clone(), tcp)
                    .await
                    .map(|tls| Stream::Tls(Box::new(tls)))
                    .map_err(|_| ()),
            }
        };
        tokio::select! {
            connected = tokio::time::timeout(self.shared.timeout, connecting) => match connected {
                Ok(Ok(stream)) => Ok(Some(stream)),
                _ => Err(()),
            },
            () = self.stop_signal.as_mut() => Ok(None),
        }
    }

    /// Queues as many requests as are allowed now into `wbuf`. The closed
    /// model sends a new batch of `pipeline` requests only once the last
    /// batch is answered (wrk's pipeline.lua); the open model sends each
    /// request when it is due and a slot is free.
    fn fill(&mut self, wbuf: &mut Vec<u8>, now: Instant) {
        if self.schedule.is_none() && !self.in_flight.is_empty() {
            return;
        }
        while self.in_flight.len() < self.shared.pipeline && !self.shared.stopping() {
            let intended = match &self.schedule {
                Some(schedule) if schedule.next > now => return,
                Some(schedule) => schedule.next,
                None => now,
            };
            if !self.shared.take_permit() {
                // Budget spent: nothing more will be due.
                self.schedule = None;
                return;
            }
            let request = &self.shared.requests[self.next_request];
            self.next_request = (self.next_request + 1) % self.shared.requests.len();
            wbuf.extend_from_slice(&request.bytes);
            self.in_flight.push_back(InFlight {
                intended,
                sent: now,
                head: request.head,
            });
            if let Some(schedule) = &mut self.schedule {
                schedule.next += schedule.interval;
            }
        }
    }

    async fn session<S: AsyncRead + AsyncWrite + Unpin>(&mut self, mut stream: S) -> SessionEnd {
        let mut rbuf = BytesMut::with_capacity(READ_RESERVE);
        let mut wbuf = Vec::with_capacity(4096);
        let mut reader = ResponseReader::default();
        loop {
            self.fill(&mut wbuf, Instant::now());
            if !wbuf.is_empty() {
                if let Some(end) = self.write(&mut stream, &wbuf).await {
                    return end;
                }
                wbuf.clear();
            }
            if self.in_flight.is_empty() && (self.schedule.is_none() || self.shared.stopping()) {
                // Nothing to send any more: the budget is spent or the run is over.
                return SessionEnd::Stop;
            }
            if let Some(front) = self.in_flight.front() {
                self.arm_timer(front.sent + self.shared.timeout);
            }
            let can_send = self.in_flight.len() < self.shared.pipeline;
            if let (Some(schedule), true) = (&self.schedule, can_send) {
                self.send_timer.as_mut().reset(schedule.next);
            }
            if rbuf.capacity() - rbuf.len() < READ_RESERVE / 4 {
                rbuf.reserve(READ_RESERVE);
            }
            tokio::select! {
                biased;
                read = stream.read_buf(&mut rbuf) => {
                    let now = Instant::now();
                    match read {
                        Ok(0) => return self.at_eof(&mut reader),
                        Ok(n) => self.stats.borrow_mut().bytes(n, now),
                        Err(_) => return SessionEnd::Failed(ErrorKind::Read),
                    }
                    if let Some(end) = self.responses(&mut reader, &mut rbuf, now) {
                        return end;
                    }
                    // The read branch is polled first: a server that never
                    // pauses must not keep the stop from being seen.
                    if self.shared.stopping() {
                        return SessionEnd::Stop;
                    }
                }
                () = self.stop_signal.as_mut() => return SessionEnd::Stop,
                () = self.timer.as_mut() => {
                    let now = Instant::now();
                    match self.in_flight.front() {
                        Some(front) if now >= front.sent + self.shared.timeout => {
                            return SessionEnd::Failed(ErrorKind::Timeout)
                        }
                        // Early: park the timer until a request is in flight again.
                        _ => self.timer.as_mut().reset(now + Duration::from_secs(3600)),
                    }
                }
                () = self.send_timer.as_mut(), if self.schedule.is_some() && can_send => {}
            }
        }
    }

    /// Makes the timer fire no later than `deadline`. It is only ever moved
    /// earlier here: moving it on every request would cost a timer-wheel
    /// update per request; a timer that fires early is re-checked and parked.
    fn arm_timer(&mut self, deadline: Instant) {
        if deadline < self.timer.deadline() {
            self.timer.as_mut().reset(deadline);
        }
    }

    /// Writes a batch, giving up at the stop or when its oldest request
    /// times out (a server that stops reading must not hang the run).
    async fn write<S: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        bytes: &[u8],
    ) -> Option<SessionEnd> {
        let deadline = self.in_flight.front().map_or_else(
            || Instant::now() + self.shared.timeout,
            |front| front.sent + self.shared.timeout,
        );
        self.arm_timer(deadline);
        let write = stream.write_all(bytes);
        tokio::pin!(write);
        loop {
            tokio::select! {
                biased;
                written = &mut write => return written.err().map(|_| SessionEnd::Failed(ErrorKind::Write)),
                () = self.stop_signal.as_mut() => return Some(SessionEnd::Stop),
                () = self.timer.as_mut() => {
                    if Instant::now() >= deadline {
                        return Some(SessionEnd::Failed(ErrorKind::Timeout));
                    }
                    self.timer.as_mut().reset(deadline);
                }
            }
        }
    }

    /// Records every response completed in `rbuf`.
    fn responses(
        &mut self,
        reader: &mut ResponseReader,
        rbuf: &mut BytesMut,
        now: Instant,
    ) -> Option<SessionEnd> {
        let mut completed = 0u64;
        let mut end = None;
        {
            let mut stats = self.stats.borrow_mut();
            while let Some(front) = self.in_flight.front().copied() {
                match reader.advance(rbuf, front.head) {
                    Ok(Some(done)) => {
                        self.in_flight.pop_front();
                        stats.response(done.status, front.intended, front.sent, now);
                        completed += 1;
                        if done.close {
                            end = Some(SessionEnd::Reconnect);
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        end = Some(SessionEnd::Failed(ErrorKind::Parse));
                        break;
                    }
                }
            }
            if end.is_none() && self.in_flight.is_empty() && !rbuf.is_empty() {
                // Bytes nobody asked for.
                end = Some(SessionEnd::Failed(ErrorKind::Parse));
            }
        }
        self.progress.fetch_add(completed, Ordering::Relaxed);
        self.shared.finish(completed);
        end
    }

    fn at_eof(&mut self, reader: &mut ResponseReader) -> SessionEnd {
        let now = Instant::now();
        if let Some(done) = reader.finish_at_eof() {
            let Some(front) = self.in_flight.pop_front() else {
                return SessionEnd::Failed(ErrorKind::Parse);
            };
            self.stats
                .borrow_mut()
                .response(done.status, front.intended, front.sent, now);
            self.progress.fetch_add(1, Ordering::Relaxed);
            self.shared.finish(1);
        }
        if self.in_flight.is_empty() {
            SessionEnd::Reconnect
        } else {
            SessionEnd::Failed(ErrorKind::Read)
        }
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}
