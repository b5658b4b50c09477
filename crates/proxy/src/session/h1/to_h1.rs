//! The wire part of an HTTP/1.1 client's attempt on an HTTP/1.1
//! upstream (`H1ToH1`, run by `attempts::run`): a pooled or new
//! connection, the request head (and the body when it is all here) in one
//! write, the rest of the body streamed (`pump_h1`), then the response
//! head, its interim answers forwarded or dropped (`wire::interim`),
//! reading while earlier pipelined answers still wait.

use crate::ids::HostId;
use crate::session::{
    attempts::{
        hosts::Hosts,
        to_upstream::{ClientSide, Failed, Http1, ToUpstream},
    },
    h1::waits::UpstreamRead,
    Failure, Session, CLIENT_CLOSED, UPSTREAM_LIMITS,
};
use crate::upstream::pool::UpstreamConn;
use crate::wire::fields::Fields;
use crate::wire::interim::{self, TooMany};
use http1::io::write_bounded;
use http1::{Head, ResponseHead};
use Failed::{Final as SendFailed, Reset, Stale};

use std::{future::Future, time::Instant};

use bytes::Buf;
use http::{Method, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Writes the request (streaming the rest of its body) and reads the
    /// final response head (interim answers as `final_head` says).
    pub(in crate::session) async fn send_and_read_head(
        &mut self,
        hosts: &Hosts<'_>,
        head: &Head,
        conn: &mut UpstreamConn,
        replayable: bool,
        sent_at: Instant,
    ) -> Result<ResponseHead, Failed> {
        let timeout = hosts.attempt_timeout();
        if !write_bounded(&mut conn.stream, &self.ubuf, timeout).await {
            return Err(if conn.reused {
                Stale
            } else {
                Reset(hosts.broken(conn.host, "cannot send the request", !replayable))
            });
        }
        let deadline = if replayable {
            tokio::time::Instant::from_std(sent_at) + timeout
        } else {
            self.stream_body(hosts, head, conn)
                .await
                .map_err(SendFailed)?;
            tokio::time::Instant::now() + timeout
        };
        if self.body_abandoned {
            // The upstream spoke before the body ended (an early 413 or
            // 401): what it said is read below; the client's connection
            // closes after the answer (RFC 9112 9.6).
            debug!(peer = %self.peer, "the upstream answered before the request body ended");
        }
        loop {
            // Nothing to parse before the first read (the usual case).
            if !conn.buf.is_empty() {
                match self.final_head(hosts, head, conn) {
                    Ok(Some(response)) => return Ok(response),
                    Ok(None) => {}
                    Err(failure) => return Err(SendFailed(failure)),
                }
            }
            match self.read_upstream(conn, deadline, true).await {
                UpstreamRead::ClientGone | UpstreamRead::ClientClosed => {
                    return Err(SendFailed(Failure::new(
                        CLIENT_CLOSED,
                        "the client closed its connection",
                    )))
                }
                UpstreamRead::Done(Ok(0) | Err(_)) if conn.reused && conn.buf.is_empty() => {
                    return Err(Stale)
                }
                UpstreamRead::Done(Ok(0) | Err(_)) if conn.buf.is_empty() => {
                    return Err(Reset(hosts.broken(
                        conn.host,
                        "the upstream closed the connection before answering",
                        false,
                    )))
                }
                UpstreamRead::Done(Ok(0)) => {
                    return Err(SendFailed(hosts.broken(
                        conn.host,
                        "the upstream closed the connection in its answer's head",
                        false,
                    )))
                }
                UpstreamRead::Done(Err(err)) => {
                    return Err(SendFailed(hosts.broken(
                        conn.host,
                        &format!("read failed: {err}"),
                        false,
                    )))
                }
                UpstreamRead::Done(Ok(_)) => {}
                UpstreamRead::TimedOut => {
                    return Err(SendFailed(hosts.timed_out(conn.host, timeout)));
                }
            }
        }
    }

    /// The final response head if `conn.buf` starts with one, after the
    /// interim (1xx) answers before it, each forwarded to the client or
    /// dropped as the interim rule says (`wire::interim`); `None` while
    /// the buffer holds nothing more than the start of a head.
    #[inline(always)]
    pub(in crate::session) fn final_head(
        &mut self,
        hosts: &Hosts<'_>,
        head: &Head,
        conn: &mut UpstreamConn,
    ) -> Result<Option<ResponseHead>, Failure> {
        self.past_interim(head, conn)
            .map_err(|detail| hosts.broken(conn.host, &detail, false))
    }

    /// [`Session::final_head`], with what is wrong with the head.
    #[inline(always)]
    pub(in crate::session) fn past_interim(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
    ) -> Result<Option<ResponseHead>, String> {
        loop {
            self.response_fields.clear();
            let head_request = head.method == Method::HEAD;
            let response = match http1::parse_response_head(
                &conn.buf,
                UPSTREAM_LIMITS.max_head,
                head_request,
                &mut self.response_fields,
            ) {
                Ok(Some(response)) => response,
                Ok(None) => return Ok(None),
                Err(rejection) => return Err(rejection.detail),
            };
            if !interim::is_interim(response.status) {
                return Ok(Some(response));
            }
            // Taken out while the client side writes the interim head
            // (rare: the fields are the session's own).
            let fields = std::mem::take(&mut self.response_fields);
            let passed = ClientSide::interim(
                self,
                response.status,
                Fields::H1 {
                    buf: &conn.buf,
                    fields: &fields,
                },
            );
            self.response_fields = fields;
            passed.map_err(|TooMany| TooMany::DETAIL.to_string())?;
            conn.buf.advance(response.len);
        }
    }
}

/// An HTTP/1.1 client's request to an HTTP/1.1 upstream, one attempt at
/// a time: the head (and the body in hand) in one write from `ubuf`, the
/// rest of the body streamed from the client while the upstream is
/// watched (`pump_h1`), the head read in place.
pub(in crate::session) struct H1ToH1<'s, S> {
    pub session: &'s mut Session<S>,
    pub head: &'s Head,
    /// The whole body is in `ubuf`.
    pub replayable: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> ToUpstream for H1ToH1<'_, S> {
    type Conn = UpstreamConn;
    type Head = ResponseHead;
    type Upstream = Http1;
    type Client = Session<S>;

    fn client(&mut self) -> &mut Session<S> {
        self.session
    }

    fn send(
        &mut self,
        hosts: &Hosts<'_>,
        _host: HostId,
        conn: &mut UpstreamConn,
        sent_at: Instant,
    ) -> impl Future<Output = Result<ResponseHead, Failed>> + Send {
        let (head, replayable) = (self.head, self.replayable);
        self.session
            .send_and_read_head(hosts, head, conn, replayable, sent_at)
    }

    fn traceparent(&mut self, value: &[u8; 55]) {
        crate::wire::traceparent::set_in_h1(&mut self.session.ubuf, value);
    }

    fn status(head: &ResponseHead) -> StatusCode {
        head.status
    }

    fn close(&mut self, conn: UpstreamConn, _: Option<ResponseHead>) {
        let metrics = self.session.worker.metrics();
        metrics.upstream_open(conn.upstream, -1);
    }
}
