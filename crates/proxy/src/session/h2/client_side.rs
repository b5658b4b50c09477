//! The client's side of one HTTP/2 stream, as the upstream phases see
//! it: a reset to watch for while upstream work waits (so that the work
//! is dropped with the stream), interim answers and the response head
//! to send it, the chain's response phase, and the rules its request
//! trailers go by.

use std::{
    future::{poll_fn, Future},
    pin::pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use h2::{server::SendResponse, SendStream};
use http::{HeaderMap, Response, StatusCode};

use super::Stream;
use crate::{
    config::TrailerPolicy,
    session::{attempts::to_upstream::ClientSide, passable_trailers, Failure, CLIENT_CLOSED},
    telemetry::{Event, Shard},
    wire::{
        edits::HeaderEdits,
        fields::Fields,
        http2,
        interim::{Interim, TooMany},
    },
};

/// Where a stream's reset can be watched: before the response head
/// (`SendResponse`) and while its body goes out (`SendStream`).
pub(super) trait ResetWatch {
    /// Ready once the client has reset the stream.
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

impl ResetWatch for Option<SendResponse<Bytes>> {
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Some(respond) => respond.poll_reset(cx).map(drop),
            None => Poll::Pending,
        }
    }
}

impl ResetWatch for SendStream<Bytes> {
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_reset(cx).map(drop)
    }
}

/// Runs `work` unless the client resets its stream first (`None`): an
/// upstream exchange must not outlive the stream it answers.
pub(super) async fn unless_reset<F: Future>(
    client: &mut impl ResetWatch,
    work: F,
) -> Option<F::Output> {
    let mut work = pin!(work);
    poll_fn(|cx| {
        // The work first: what is done at once needs no look at the
        // stream (a lock in `h2`), and a reset seen late costs nothing.
        if let Poll::Ready(done) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(done));
        }
        client.poll_client_reset(cx).map(|()| None)
    })
    .await
}

impl ClientSide for Stream {
    /// A stream keeps no clock of its own.
    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }

    fn unless_gone<F: Future + Send>(
        &mut self,
        work: F,
    ) -> impl Future<Output = Result<F::Output, Failure>> + Send {
        self.unless_reset(work)
    }

    /// A non-final HEADERS frame, or dropped.
    fn interim(&mut self, status: StatusCode, fields: Fields<'_>) -> Result<(), TooMany> {
        match self.interim.classify(status) {
            Ok(Interim::Forward) => {
                if let Some(respond) = self.respond.as_mut() {
                    let head = http2::client_response(status, fields, false, None);
                    let _ = respond.send_informational(head);
                }
            }
            Ok(_) => {}
            Err(TooMany) => {
                self.worker.metrics().event(Event::InterimFlood);
                return Err(TooMany);
            }
        }
        Ok(())
    }
}

/// What may become of a client's request trailers on their way upstream.
#[derive(Clone, Copy)]
pub(super) struct TrailerRules<'a> {
    /// The route lets them pass to this upstream (`request_trailers`).
    pub forward: bool,
    /// The route's edits to the request head: those fields never pass.
    pub edits: Option<&'a HeaderEdits>,
    pub metrics: &'a Shard,
}

impl TrailerRules<'_> {
    /// The trailers that go on, if any.
    pub(super) fn passable(&self, trailers: HeaderMap) -> Option<HeaderMap> {
        if !self.forward {
            self.metrics.event(Event::TrailersDropped);
            return None;
        }
        Some(passable_trailers(trailers, self.edits, self.metrics)).filter(|t| !t.is_empty())
    }
}

/// What the upstream phases ask of the client's side of the stream.
impl Stream {
    /// Where the route sends the client's request trailers.
    pub(super) fn request_trailers(&self) -> TrailerPolicy {
        self.route.map_or(TrailerPolicy::Auto, |route| {
            self.plan.route(route).request_trailers
        })
    }

    /// Runs the chain's response phase; its edits, taken out of the exchange.
    pub(super) fn response_edits(&mut self, status: StatusCode) -> Option<HeaderEdits> {
        let alt_svc = self.origin.alt_svc;
        crate::session::response_edits(self.chain.as_ref(), &mut self.exchange, status, alt_svc)
    }

    /// Runs `work` unless the client resets the stream first: then `work`
    /// is dropped at once (with it the upstream connection, closed, or
    /// the upstream stream, reset) and the answer is [`Stream::cancelled`].
    pub(super) async fn unless_reset<F: Future>(&mut self, work: F) -> Result<F::Output, Failure> {
        let mut work = pin!(work);
        let respond = &mut self.respond;
        // As `unless_reset`, in this one future (no layer more).
        let done = poll_fn(|cx| {
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            respond.poll_client_reset(cx).map(|()| None)
        })
        .await;
        done.ok_or_else(|| self.cancelled())
    }

    /// The client reset its stream: nothing more goes to it.
    pub(super) fn cancelled(&mut self) -> Failure {
        self.reset = true;
        Failure::new(CLIENT_CLOSED, "the client reset the stream")
    }

    /// Sends the response head; the stream for its body unless `end`.
    pub(super) fn send_head(
        &mut self,
        response: Response<()>,
        end: bool,
    ) -> Option<SendStream<Bytes>> {
        let respond = self.respond.as_mut()?;
        let sent = respond.send_response(response, end).ok();
        self.respond = None;
        sent
    }
}
