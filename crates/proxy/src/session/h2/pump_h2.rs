//! The request body of an HTTP/2 client's stream on its way to an
//! HTTP/2 upstream: the held bytes, or the client's DATA frames as they
//! come, then its trailers, pumped while `to_h2` waits for the answer
//! and relays it.

use std::{
    future::{poll_fn, Future},
    pin::Pin,
    task::Poll,
};

use bytes::Bytes;
use h2::{Reason, SendStream};

use super::{RequestBody, TrailerRules};
use crate::upstream::h2_pool::send_data;

/// Why pumping the request body stopped early.
pub(super) enum PumpError {
    /// The client broke off (or reset) its stream.
    Client,
    /// The upstream stream cannot take more.
    Upstream,
    /// More than the route allows.
    TooLarge,
}

/// Sends the request body upstream: the held bytes, or the client's DATA
/// frames as they come (their flow-control credit returned to the client
/// only once the upstream took them), then the client's trailers as the
/// route's `request_trailers` and the trailer rules allow.
pub(super) async fn pump(
    body: RequestBody,
    mut upstream: SendStream<Bytes>,
    max_body: usize,
    trailer_rules: TrailerRules<'_>,
) -> Result<(), PumpError> {
    let mut client = match body {
        RequestBody::Empty => return Ok(()),
        RequestBody::Held(bytes, trailers) => {
            let trailers = trailers.and_then(|t| trailer_rules.passable(t));
            send_data(&mut upstream, bytes, trailers.is_none(), None)
                .await
                .map_err(|_| PumpError::Upstream)?;
            return match trailers {
                Some(trailers) => upstream
                    .send_trailers(trailers)
                    .map_err(|_| PumpError::Upstream),
                None => Ok(()),
            };
        }
        RequestBody::Streaming(client) => client,
    };
    let mut sent = 0;
    while let Some(data) = client.data().await {
        let data = data.map_err(|_| {
            upstream.send_reset(Reason::CANCEL);
            PumpError::Client
        })?;
        let len = data.len();
        sent += len;
        if sent > max_body {
            upstream.send_reset(Reason::CANCEL);
            return Err(PumpError::TooLarge);
        }
        let last = client.is_end_stream();
        send_data(&mut upstream, data, last, None)
            .await
            .map_err(|_| PumpError::Upstream)?;
        let _ = client.flow_control().release_capacity(len);
        if last {
            return Ok(());
        }
    }
    match client.trailers().await {
        Ok(Some(trailers)) => match trailer_rules.passable(trailers) {
            Some(trailers) => upstream
                .send_trailers(trailers)
                .map_err(|_| PumpError::Upstream),
            None => send_data(&mut upstream, Bytes::new(), true, None)
                .await
                .map_err(|_| PumpError::Upstream),
        },
        Ok(None) => send_data(&mut upstream, Bytes::new(), true, None)
            .await
            .map_err(|_| PumpError::Upstream),
        Err(_) => {
            upstream.send_reset(Reason::CANCEL);
            Err(PumpError::Client)
        }
    }
}

/// The pump's end, once (pending after, and while there is none).
pub(super) async fn pumped<F: Future<Output = Result<(), PumpError>>>(
    mut pumping: Pin<&mut Option<F>>,
) -> Result<(), PumpError> {
    let done = poll_fn(|cx| match pumping.as_mut().as_pin_mut() {
        Some(pump) => pump.poll(cx),
        None => Poll::Pending,
    })
    .await;
    pumping.set(None);
    done
}
