//! The client's side of one HTTP/2 stream, as the upstream phases see
//! it: a reset to watch for while upstream work waits (so that the work
//! is dropped with the stream), and the rules its request trailers go by.

use std::{
    future::{poll_fn, Future},
    pin::pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use h2::{server::SendResponse, SendStream};
use http::HeaderMap;

use crate::{
    session::passable_trailers,
    telemetry::{Event, Shard},
    wire::edits::HeaderEdits,
};

/// The client's side of a stream, whose reset can be watched: before
/// the response head (`SendResponse`) and while its body goes out
/// (`SendStream`).
pub(super) trait ClientSide {
    /// Ready once the client has reset the stream.
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

impl ClientSide for Option<SendResponse<Bytes>> {
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Some(respond) => respond.poll_reset(cx).map(drop),
            None => Poll::Pending,
        }
    }
}

impl ClientSide for SendStream<Bytes> {
    fn poll_client_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_reset(cx).map(drop)
    }
}

/// Runs `work` unless the client resets its stream first (`None`): an
/// upstream exchange must not outlive the stream it answers.
pub(super) async fn unless_reset<F: Future>(
    client: &mut impl ClientSide,
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
