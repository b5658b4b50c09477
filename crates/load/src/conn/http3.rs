//! HTTP/3 sessions on quinn and h3: up to `streams` requests in flight on
//! one QUIC connection, each timed on its own.
//!
//! Each connection has its own UDP socket (its own quinn endpoint), as
//! h2load's connections do, so that one connection's datagrams never wait
//! behind another's in a socket buffer. quinn drives each endpoint and
//! connection in tasks of its own on the thread's runtime (they send the
//! packets, ACKs and retransmissions); this connection's task drives the
//! h3 control stream and the requests. A request is a future that opens a
//! stream, writes the head (QPACK without dynamic table, as h3 encodes),
//! the body and the end of the stream, then reads the response to its end,
//! its data discarded as it arrives (quinn gives the flow-control credit
//! back as data is read). The futures sit in [`Slots`], so that a pass
//! polls only those that were woken, as for HTTP/2.

use std::{
    cell::Cell,
    future::{poll_fn, Future},
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    pin::Pin,
    rc::Rc,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, LocalError, StreamError};
use quinn::crypto::rustls::QuicClientConfig;
use tokio::time::Instant;

use super::{
    slots::{self, Slots},
    Client, Next, SessionEnd, Stream, Template,
};
use crate::{
    checks::Captured,
    figures::{Connected, ErrorKind},
    ConfigError,
};

/// ALPN of HTTP/3 (RFC 9114 section 3.1).
pub(crate) const ALPN_H3: &[u8] = b"h3";
/// Receive window of each stream: responses up to 1 MiB never wait for a
/// MAX_STREAM_DATA, as with HTTP/2.
const STREAM_WINDOW: u32 = 1 << 20;
/// Receive window of the connection, shared by its streams.
const CONNECTION_WINDOW: u32 = 16 << 20;
/// A silent server is given up after this long (quinn's default is 30 s;
/// `--timeout` bounds each request anyway).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// A PING this often keeps a quiet connection (a user thinking) open, as
/// a kept-alive TCP connection stays open.
const KEEP_ALIVE: Duration = Duration::from_secs(4);
/// The application error code of a graceful close (RFC 9114 section 8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);
/// The TLS alert a server sends when it has none of the ALPN protocols
/// offered (no_application_protocol), as a QUIC CRYPTO_ERROR.
const NO_APPLICATION_PROTOCOL: u64 = 0x100 + 120;

/// How each connection reaches the server: the QUIC and TLS client
/// configuration, built once.
pub(crate) struct Dialer {
    config: quinn::ClientConfig,
    server_name: String,
    /// The unspecified address of the server's family, port 0.
    bind: SocketAddr,
}

impl Dialer {
    /// `tls` must offer ALPN `h3` and TLS 1.3.
    pub(crate) fn new(
        tls: tls::rustls::ClientConfig,
        server_name: &str,
        server: SocketAddr,
    ) -> Result<Self, ConfigError> {
        let crypto = QuicClientConfig::try_from(Arc::new(tls))
            .map_err(|err| ConfigError(format!("QUIC TLS setup failed: {err}")))?;
        let mut transport = quinn::TransportConfig::default();
        transport
            .stream_receive_window(STREAM_WINDOW.into())
            .receive_window(CONNECTION_WINDOW.into())
            // The server opens no request streams; its control and QPACK
            // streams are unidirectional.
            .max_concurrent_bidi_streams(0u32.into())
            .max_idle_timeout(Some(
                IDLE_TIMEOUT
                    .try_into()
                    .map_err(|_| ConfigError("QUIC idle timeout out of range".into()))?,
            ))
            .keep_alive_interval(Some(KEEP_ALIVE));
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport));
        let bind = match server {
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        Ok(Self {
            config,
            server_name: server_name.to_string(),
            bind,
        })
    }
}

/// Why a QUIC connect failed.
enum Refusal {
    /// Counted as a connect error, and tried again.
    Failed,
    /// The run cannot go on: this says why.
    Fatal(String),
}

impl Client {
    /// [`Client::connect`] for HTTP/3: `Ok(None)` if the run stopped while
    /// connecting or cannot go on (the server refused ALPN `h3`).
    pub(super) async fn connect_quic(&mut self, dialer: &Dialer) -> Result<Option<Stream>, ()> {
        let began = Instant::now();
        let connecting = connect(dialer, self.shared.addr);
        tokio::select! {
            connected = tokio::time::timeout(self.shared.timeout, connecting) => match connected {
                Ok(Ok(stream)) => {
                    // QUIC's handshake is its TLS handshake: no connect of its own.
                    let phases = Connected { connect: None, tls: Some(began.elapsed()) };
                    self.stats.borrow_mut().connected(&phases, Instant::now());
                    Ok(Some(stream))
                }
                Ok(Err(Refusal::Fatal(why))) => {
                    self.shared.fail(format!("--h3: {}: {why}", self.shared.target));
                    Ok(None)
                }
                _ => Err(()),
            },
            () = self.stop_signal.as_mut() => Ok(None),
        }
    }
}

/// Connects over QUIC: a new UDP socket, the handshake (TLS 1.3, ALPN `h3`).
async fn connect(dialer: &Dialer, server: SocketAddr) -> Result<Stream, Refusal> {
    let endpoint = quinn::Endpoint::client(dialer.bind).map_err(|_| Refusal::Failed)?;
    let connecting = endpoint
        .connect_with(dialer.config.clone(), server, &dialer.server_name)
        .map_err(|err| Refusal::Fatal(format!("cannot connect over QUIC: {err}")))?;
    // The endpoint's driver runs on until its connection is closed.
    drop(endpoint);
    match connecting.await {
        Ok(connection) => Ok(Stream::Quic(connection)),
        Err(quinn::ConnectionError::ConnectionClosed(close))
            if u64::from(close.error_code) == NO_APPLICATION_PROTOCOL =>
        {
            Err(Refusal::Fatal(
                "the server does not speak HTTP/3: it refused ALPN `h3` \
                 (without --h3 it is loaded over HTTP/1.1)"
                    .into(),
            ))
        }
        Err(_) => Err(Refusal::Failed),
    }
}

type Requester = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A complete answer.
struct Answer {
    status: u16,
    first_byte: Instant,
    captured: Option<Captured>,
}

type Outcome = Result<Answer, StreamError>;

/// A request in flight on its stream.
struct Exchange {
    request: Next,
    sent: Instant,
    future: Pin<Box<dyn Future<Output = Outcome>>>,
    /// Once the answer is complete: when its head arrived, what the checks read.
    first_byte: Option<Instant>,
    captured: Option<Captured>,
}

/// One HTTP/3 connection.
struct Session {
    /// Drives the h3 control stream (SETTINGS, GOAWAY).
    driver: h3::client::Connection<h3_quinn::Connection, Bytes>,
    send: Requester,
    quic: quinn::Connection,
    exchanges: Slots<Exchange>,
    /// UDP payload bytes received so far and counted.
    counted: u64,
    /// The server sent GOAWAY: reconnect once the open streams have ended.
    draining: Rc<Cell<bool>>,
}

impl Client {
    /// An HTTP/3 session; returns how it ended and how many requests it lost.
    pub(super) async fn http3(
        &mut self,
        quic: quinn::Connection,
        requests: &[Template],
    ) -> (SessionEnd, u64) {
        let mut builder = h3::client::builder();
        let build = builder.build::<_, _, Bytes>(h3_quinn::Connection::new(quic.clone()));
        let (driver, send) = tokio::select! {
            built = build => match built {
                Ok(pair) => pair,
                Err(_) => return (SessionEnd::Failed(ErrorKind::Write), 0),
            },
            () = self.stop_signal.as_mut() => return (SessionEnd::Stop, 0),
        };
        let mut session = Session {
            driver,
            send,
            quic,
            exchanges: Slots::new(self.shared.streams),
            counted: 0,
            draining: Rc::new(Cell::new(false)),
        };
        self.free_since = Instant::now();
        let end = poll_fn(|cx| self.poll_h3(cx, &mut session, requests)).await;
        let lost = session.exchanges.len() as u64;
        // Dropping the requests' streams resets them; closing tells the
        // server at once rather than after its idle timeout.
        drop(session.exchanges);
        session.quic.close(H3_NO_ERROR, b"");
        (end, lost)
    }

    fn poll_h3(
        &mut self,
        cx: &mut Context<'_>,
        session: &mut Session,
        requests: &[Template],
    ) -> Poll<SessionEnd> {
        session.exchanges.set_task(cx.waker());
        loop {
            // Checked on every pass: a server that never pauses must not
            // keep the stop from being seen.
            if self.stop_signal.as_mut().poll(cx).is_ready() || self.shared.stopping() {
                return Poll::Ready(SessionEnd::Stop);
            }
            let closed = match session.driver.poll_close(cx) {
                Poll::Ready(err) => Some(err),
                Poll::Pending => None,
            };
            let now = Instant::now();
            let received = session.quic.stats().udp_rx.bytes;
            if received > session.counted {
                self.stats
                    .borrow_mut()
                    .bytes((received - session.counted) as usize, now);
                session.counted = received;
            }
            if session.exchanges.is_full() {
                // Whatever ends now frees a slot that due requests wait for.
                self.free_since = now;
            }
            let before = session.exchanges.len();
            self.poll_exchanges(&mut session.exchanges, now);
            if let Some(err) = closed {
                // Anything still in flight is lost (one read error).
                return Poll::Ready(match closed_kind(&err) {
                    None => SessionEnd::Reconnect,
                    Some(kind) if session.exchanges.is_empty() => SessionEnd::Failed(kind),
                    Some(_) => SessionEnd::Reconnect,
                });
            }
            while self.timer.as_mut().poll(cx).is_ready() {
                self.expire(&mut session.exchanges);
            }
            let (opened, due) = self.open_h3_streams(session, requests, now);
            if session.exchanges.is_empty() {
                if session.draining.get() {
                    return Poll::Ready(SessionEnd::Reconnect);
                }
                if self.spent && self.retry.is_empty() {
                    return Poll::Ready(SessionEnd::Stop);
                }
                if self.off_duty(now) && self.retry.is_empty() {
                    return Poll::Ready(SessionEnd::OffDuty);
                }
            }
            // New streams are polled at once (that writes them); ended ones
            // may let more requests go.
            if opened || session.exchanges.len() < before {
                continue;
            }
            if let Some(due) = due {
                if self.send_timer.deadline() != due {
                    self.send_timer.reset(due);
                }
                if Pin::new(&mut self.send_timer).poll(cx).is_ready() {
                    continue;
                }
            }
            return Poll::Pending;
        }
    }

    /// Starts requests while slots are free and requests are due. Returns
    /// whether it started any, and when the next request falls due if that
    /// is what it waits for (open model).
    fn open_h3_streams(
        &mut self,
        session: &mut Session,
        requests: &[Template],
        now: Instant,
    ) -> (bool, Option<Instant>) {
        let mut opened = false;
        while !session.draining.get() && !session.exchanges.is_full() {
            let Some(next) = self.take_next(now) else {
                return (opened, self.next_due(now));
            };
            let template = &requests[next.index];
            let captured = self.shared.checks.as_ref().and_then(|c| c.capture());
            session.exchanges.insert(Exchange {
                request: next,
                sent: now,
                future: Box::pin(exchange(
                    session.send.clone(),
                    template.head.clone(),
                    template.body.clone(),
                    Rc::clone(&session.draining),
                    captured,
                )),
                first_byte: None,
                captured: None,
            });
            self.arm_timer(now + self.shared.timeout);
            opened = true;
        }
        (opened, None)
    }
}

/// One request: open a stream, send the head and body, read the response
/// to its end (data discarded, trailers read; kept in `captured` as far
/// as the checks read it).
async fn exchange(
    mut send: Requester,
    head: http::Request<()>,
    body: Bytes,
    draining: Rc<Cell<bool>>,
    mut captured: Option<Captured>,
) -> Outcome {
    let mut stream = match send.send_request(head).await {
        Ok(stream) => stream,
        Err(err) => {
            if matches!(err, StreamError::RemoteClosing { .. }) {
                draining.set(true);
            }
            return Err(err);
        }
    };
    drop(send);
    if !body.is_empty() {
        stream.send_data(body).await?;
    }
    stream.finish().await?;
    let response = stream.recv_response().await?;
    let first_byte = Instant::now();
    if let Some(captured) = &mut captured {
        for (name, value) in response.headers() {
            captured.header(name.as_str().as_bytes(), value.as_bytes());
        }
    }
    while let Some(mut data) = stream.recv_data().await? {
        if let Some(captured) = &mut captured {
            while data.has_remaining() {
                let chunk = data.chunk();
                captured.body(chunk);
                let read = chunk.len();
                data.advance(read);
            }
        }
        data.advance(data.remaining());
    }
    stream.recv_trailers().await?;
    Ok(Answer {
        status: response.status().as_u16(),
        first_byte,
        captured,
    })
}

impl slots::Exchange for Exchange {
    type Error = StreamError;

    fn poll(&mut self, cx: &mut Context<'_>, _now: Instant) -> Poll<Result<u16, StreamError>> {
        let answer = ready!(self.future.as_mut().poll(cx))?;
        self.first_byte = Some(answer.first_byte);
        self.captured = answer.captured;
        Poll::Ready(Ok(answer.status))
    }

    fn first_byte(&self) -> Option<Instant> {
        self.first_byte
    }

    fn captured(&self) -> Option<&Captured> {
        self.captured.as_ref()
    }

    fn request(&self) -> Next {
        self.request
    }

    fn sent(&self) -> Instant {
        self.sent
    }

    /// Not processed (RFC 9114 section 4.1.1): rejected with
    /// H3_REQUEST_REJECTED, or not sent because the server is going away.
    fn refused(err: &StreamError) -> bool {
        match err {
            StreamError::RemoteClosing { .. } => true,
            StreamError::RemoteTerminate { code, .. } => *code == Code::H3_REQUEST_REJECTED,
            _ => false,
        }
    }

    /// A response h3 found malformed is a parse error; a reset stream, a
    /// broken or closed connection a read error.
    fn error_kind(err: &StreamError) -> ErrorKind {
        match err {
            StreamError::StreamError { .. } | StreamError::HeaderTooBig { .. } => ErrorKind::Parse,
            StreamError::ConnectionError { 0: err, .. } => {
                closed_kind(err).unwrap_or(ErrorKind::Read)
            }
            _ => ErrorKind::Read,
        }
    }
}

/// How a connection's closing counts: `None` for a graceful close
/// (H3_NO_ERROR) or an idle timeout (the server went away while nothing
/// was asked of it), a parse error when this side caught a protocol
/// error, else a read error.
fn closed_kind(err: &ConnectionError) -> Option<ErrorKind> {
    if err.is_h3_no_error() || matches!(err, ConnectionError::Timeout { .. }) {
        return None;
    }
    Some(match err {
        ConnectionError::Local {
            error: LocalError::Application { .. },
            ..
        } => ErrorKind::Parse,
        _ => ErrorKind::Read,
    })
}
