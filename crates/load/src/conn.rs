//! One client connection: connect, send, read, time each request, reconnect.
//!
//! Closed model: HTTP/1.1 sends `pipeline` requests in one write, waits for
//! all their responses (each timed from that write to its own arrival),
//! repeats; HTTP/2 ([`http2`]) keeps `streams` requests in flight, opening
//! a stream as soon as one ends. Open model: request k of this connection
//! is due at `first + k * interval`; it is sent when due and a slot is
//! free (the thread's [`Pacer`] wakes it on time to the microsecond), and
//! its latency counts from when it was due, so a stalled server cannot hide
//! its stall by slowing the client (coordinated omission).
//! Users model ([`Pace`]): the closed model, one request in flight, the
//! first request not before the user's ramp time and each next one a think
//! time after the last ended; the connection stays open while it thinks.
//!
//! This module drives a connection (connect, reconnect, what is due next,
//! the run's shared budget and stop); the exchanges on it are [`http1`],
//! [`http2`] and [`http3`].

mod http1;
mod http2;
mod http3;
mod slots;

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

use tls::{
    rustls::{pki_types::ServerName, AlertDescription},
    tokio_rustls::{client::TlsStream, TlsConnector},
};
use tokio::{
    net::TcpStream,
    sync::watch,
    time::{sleep_until, Instant, Sleep},
};

use crate::{
    checks::CheckSet,
    figures::{Connected, ErrorKind},
    pacer::{Pacer, SendTimer},
    stats::Stats,
    target::Target,
    timetable::{Pace, Schedule},
};

use http1::InFlight;
pub(crate) use http1::Prepared;
pub(crate) use http2::Template;
pub(crate) use http3::{Dialer, ALPN_H3};

/// Pause before reconnecting after a failed connect.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// The rotation of requests, in the run's protocol.
pub(crate) enum Requests {
    Http1(Vec<Prepared>),
    Http2(Vec<Template>),
    /// HTTP/3 requests are HTTP/2's heads, sent with QPACK.
    Http3(Vec<Template>),
}

/// What all connections of a run share.
pub(crate) struct Shared {
    pub addr: SocketAddr,
    /// For the messages of fatal errors.
    pub target: Target,
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    /// HTTP/3: how connections reach the server over QUIC.
    pub quic: Option<Dialer>,
    pub requests: Requests,
    /// The order of the requests (indices into `requests`), as their weights say.
    pub rotation: Vec<u32>,
    /// The checks on every answer.
    pub checks: Option<CheckSet>,
    /// How long resolving the target's name took (the run's `dns` phase).
    pub resolved: Duration,
    pub pipeline: usize,
    pub streams: usize,
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
    /// Why the run cannot go on (the server does not speak the protocol asked for).
    pub fatal: OnceLock<String>,
}

impl Shared {
    pub(crate) fn request_stop(&self) {
        self.stopped_at.get_or_init(Instant::now);
        self.stopped.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
    }

    /// Ends the run with an error instead of a report.
    fn fail(&self, why: String) {
        let _ = self.fatal.set(why);
        self.request_stop();
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

/// How a session on one TCP connection ended.
enum SessionEnd {
    Stop,
    /// A user under stages stopped for now: it waits for its next stretch.
    OffDuty,
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
    send_timer: SendTimer,
    /// Open model: when the connection last had room again after being
    /// full (or started a session); a request due before that waited for
    /// the target, not for the generator.
    free_since: Instant,
    /// HTTP/1.1 requests written and not yet answered, oldest first.
    in_flight: VecDeque<InFlight>,
    /// The `-n` budget is spent: nothing more will be sent.
    spent: bool,
    /// Requests the server refused unprocessed (HTTP/2 GOAWAY or
    /// REFUSED_STREAM), to send again before any new one.
    retry: VecDeque<Next>,
    /// Users model: ramp and think times.
    pace: Option<Pace>,
    /// Responses in the measured time, across reconnects (for how evenly
    /// the target serves its connections).
    answered: u64,
}

/// A request to send.
#[derive(Debug, Clone, Copy)]
struct Next {
    /// When it was due (its first send, in the closed model).
    intended: Instant,
    /// Its place in the rotation.
    index: usize,
    /// A second attempt: a refused request is sent again once.
    again: bool,
}

impl Client {
    pub(crate) fn new(
        shared: Arc<Shared>,
        stats: Rc<RefCell<Stats>>,
        progress: Arc<AtomicU64>,
        index: usize,
        schedule: Option<Schedule>,
        pace: Option<Pace>,
        pacer: Option<&Pacer>,
    ) -> Self {
        let mut stop = shared.stop.subscribe();
        let now = Instant::now();
        Self {
            next_request: index % shared.rotation.len().max(1),
            shared,
            stats,
            progress,
            schedule,
            stop_signal: Box::pin(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            }),
            timer: Box::pin(sleep_until(now + Duration::from_secs(3600))),
            send_timer: pacer.map_or_else(|| SendTimer::coarse(now), |p| p.timer(now)),
            free_since: now,
            in_flight: VecDeque::new(),
            spent: false,
            retry: VecDeque::new(),
            pace,
            answered: 0,
        }
    }

    /// Its responses in the measured time.
    pub(crate) fn answered(&self) -> u64 {
        self.answered
    }

    /// How far behind its timetable this connection is at `now` (open model).
    pub(crate) fn lag(&self, now: Instant) -> Duration {
        self.schedule
            .as_ref()
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s.next))
    }

    /// Its requests due by `stop` and never sent (open model).
    pub(crate) fn unsent(&self, stop: Instant) -> u64 {
        self.schedule.as_ref().map_or(0, |s| s.unsent_by(stop))
    }

    /// Runs until the run stops.
    pub(crate) async fn run(&mut self) {
        while !self.shared.stopping() {
            // A user on a ramp (or a stage) connects when its turn comes.
            if let Some(start) = self.pace.as_ref().map(|pace| pace.until) {
                tokio::select! {
                    () = sleep_until(start) => {}
                    () = self.stop_signal.as_mut() => return,
                }
            }
            let shared = Arc::clone(&self.shared);
            let (end, lost) = match (self.connect().await, &shared.requests) {
                (Ok(Some(Stream::Plain(tcp))), Requests::Http1(requests)) => {
                    self.http1(tcp, requests).await
                }
                (Ok(Some(Stream::Tls(tls))), Requests::Http1(requests)) => {
                    self.http1(*tls, requests).await
                }
                (Ok(Some(Stream::Plain(tcp))), Requests::Http2(requests)) => {
                    self.http2(tcp, requests).await
                }
                (Ok(Some(Stream::Tls(tls))), Requests::Http2(requests)) => {
                    self.http2(*tls, requests).await
                }
                (Ok(Some(Stream::Quic(quic))), Requests::Http3(requests)) => {
                    self.http3(quic, requests).await
                }
                // `connect` dials QUIC exactly for HTTP/3, TCP otherwise.
                (Ok(Some(_)), _) => (SessionEnd::Stop, 0),
                (Ok(None), _) => (SessionEnd::Stop, 0),
                (Err(()), _) => {
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
            match end {
                // What is still in flight stays unanswered (the stats
                // count it as such), not lost.
                SessionEnd::Stop => return,
                SessionEnd::OffDuty => {
                    if let Some(pace) = &mut self.pace {
                        pace.next_shift(Instant::now());
                    }
                }
                // The server closed with requests unanswered.
                SessionEnd::Reconnect if lost > 0 => self.record_error(ErrorKind::Read),
                SessionEnd::Reconnect => {}
                SessionEnd::Failed(ErrorKind::Timeout) => {
                    for _ in 0..lost {
                        self.record_error(ErrorKind::Timeout);
                    }
                }
                SessionEnd::Failed(kind) => self.record_error(kind),
            }
            self.lose(lost);
            if lost > 0 {
                self.rest(Instant::now());
            }
        }
    }

    /// Users model: a request ended (answered or lost) at `now`; the user
    /// thinks before its next one.
    fn rest(&mut self, now: Instant) {
        if let Some(pace) = &mut self.pace {
            pace.rest(now);
        }
    }

    /// When the next request falls due, if the client waits for a time to
    /// send it: the open model's timetable, or a user's ramp or think time.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        match (&self.schedule, &self.pace) {
            (Some(schedule), _) => Some(schedule.next),
            (None, Some(pace)) if !self.spent && !pace.off_duty(now) => Some(pace.until),
            _ => None,
        }
    }

    /// A user under stages has stopped for now (see [`Pace::off_duty`]).
    fn off_duty(&self, now: Instant) -> bool {
        self.pace.as_ref().is_some_and(|pace| pace.off_duty(now))
    }

    /// `count` requests ended without an answer.
    fn lose(&self, count: u64) {
        if count > 0 {
            self.stats.borrow_mut().lost(count, Instant::now());
        }
        self.shared.finish(count);
    }

    fn record_error(&self, kind: ErrorKind) {
        self.stats.borrow_mut().error(kind, Instant::now());
    }

    /// `Ok(None)` if the run stopped while connecting (or cannot go on:
    /// the server does not speak HTTP/2 over TLS).
    async fn connect(&mut self) -> Result<Option<Stream>, ()> {
        let shared = Arc::clone(&self.shared);
        if let Some(dialer) = &shared.quic {
            return self.connect_quic(dialer).await;
        }
        let connecting = async move {
            let began = Instant::now();
            let tcp = TcpStream::connect(shared.addr).await.map_err(|_| None)?;
            let _ = tcp.set_nodelay(true);
            let connected = Instant::now();
            let mut phases = Connected {
                connect: Some(connected - began),
                tls: None,
            };
            let Some((connector, name)) = &shared.tls else {
                return Ok((Stream::Plain(tcp), phases));
            };
            let h2 = matches!(shared.requests, Requests::Http2(_));
            let tls = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|err| (h2 && refused_alpn(&err)).then(|| "refused it".to_string()))?;
            phases.tls = Some(connected.elapsed());
            let chosen = tls.get_ref().1.alpn_protocol();
            if h2 && chosen != Some(tls::ALPN_H2) {
                return Err(Some(chosen.map_or_else(
                    || "chose no protocol".to_string(),
                    |p| format!("chose `{}`", String::from_utf8_lossy(p)),
                )));
            }
            Ok((Stream::Tls(Box::new(tls)), phases))
        };
        tokio::select! {
            connected = tokio::time::timeout(self.shared.timeout, connecting) => match connected {
                Ok(Ok((stream, phases))) => {
                    self.stats.borrow_mut().connected(&phases, Instant::now());
                    Ok(Some(stream))
                }
                Ok(Err(Some(answer))) => {
                    self.shared.fail(format!(
                        "--h2: {} does not speak HTTP/2 over TLS: ALPN `h2` was asked for and \
                         the server {answer} (without --h2 it is loaded over HTTP/1.1)",
                        self.shared.target
                    ));
                    Ok(None)
                }
                _ => Err(()),
            },
            () = self.stop_signal.as_mut() => Ok(None),
        }
    }

    /// The next request to send at `now`, when one is due and allowed; the
    /// caller must send it. Refused requests go first, still due when they
    /// first were.
    fn take_next(&mut self, now: Instant) -> Option<Next> {
        if self.shared.stopping() {
            return None;
        }
        if let Some(refused) = self.retry.pop_front() {
            return Some(refused);
        }
        if self.spent {
            return None;
        }
        let intended = match &self.schedule {
            Some(schedule) if schedule.next > now => return None,
            Some(schedule) => schedule.next,
            None => now,
        };
        if self
            .pace
            .as_ref()
            .is_some_and(|pace| pace.until > now || pace.off_duty(now))
        {
            // The user is thinking (or not yet on the ramp, or done for now).
            return None;
        }
        if !self.shared.take_permit() {
            // Budget spent: nothing more will be due.
            self.spent = true;
            self.schedule = None;
            return None;
        }
        let mut stats = self.stats.borrow_mut();
        stats.issued(now);
        if let Some(schedule) = &mut self.schedule {
            schedule.advance();
            // The generator's own lateness: from when it could have sent.
            stats.sent(intended, intended.max(self.free_since), now);
        }
        drop(stats);
        let rotation = &self.shared.rotation;
        let index = rotation[self.next_request] as usize;
        self.next_request = (self.next_request + 1) % rotation.len();
        Some(Next {
            intended,
            index,
            again: false,
        })
    }

    /// Makes the timer fire no later than `deadline`. It is only ever moved
    /// earlier here: moving it on every request would cost a timer-wheel
    /// update per request; a timer that fires early is re-checked and parked.
    fn arm_timer(&mut self, deadline: Instant) {
        if deadline < self.timer.deadline() {
            self.timer.as_mut().reset(deadline);
        }
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Quic(quinn::Connection),
}

/// Whether a TLS handshake failed because the server has none of the ALPN
/// protocols offered (rustls servers answer with an alert).
fn refused_alpn(err: &std::io::Error) -> bool {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<tls::rustls::Error>())
        .is_some_and(|err| {
            matches!(
                err,
                tls::rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol)
            )
        })
}
