//! The request body of an HTTP/2 client's stream, as the upstream
//! exchange gets it: empty, held whole (for a handler that reads it), or
//! still arriving.

use bytes::{Bytes, BytesMut};
use h2::RecvStream;
use http::{HeaderMap, StatusCode};

use crate::session::Failure;

/// The request body as the upstream exchange gets it.
pub(super) enum RequestBody {
    Empty,
    /// Read whole for the chain, with the client's trailers if it sent
    /// any (they go on to an HTTP/2 upstream).
    Held(Bytes, Option<HeaderMap>),
    /// Still arriving from the client.
    Streaming(RecvStream),
}

impl RequestBody {
    /// Whether the whole body is in hand (it can be sent again).
    pub(super) fn in_hand(&self) -> bool {
        !matches!(self, Self::Streaming(_))
    }

    /// The body for one attempt: a copy of one in hand (shared bytes),
    /// else the streaming one itself, which only one attempt can send.
    pub(super) fn for_attempt(&mut self) -> Self {
        match self {
            Self::Empty => Self::Empty,
            Self::Held(bytes, trailers) => Self::Held(bytes.clone(), trailers.clone()),
            Self::Streaming(_) => std::mem::replace(self, Self::Empty),
        }
    }
}

/// Reads a streaming body whole, for handlers that look at it; 413 past `max`.
pub(super) async fn hold(body: RequestBody, max: usize) -> Result<RequestBody, Failure> {
    let RequestBody::Streaming(mut stream) = body else {
        return Ok(body);
    };
    let mut held = BytesMut::new();
    while let Some(data) = stream.data().await {
        let data = data.map_err(|err| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("the request body broke off: {err}"),
            )
        })?;
        let _ = stream.flow_control().release_capacity(data.len());
        if held.len() + data.len() > max {
            return Err(Failure::body_too_large(max));
        }
        held.extend_from_slice(&data);
    }
    let trailers = stream.trailers().await.map_err(|err| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("the request trailers broke off: {err}"),
        )
    })?;
    Ok(RequestBody::Held(held.freeze(), trailers))
}

/// The body through a handler's request filter (gRPC-Web's text mode):
/// read whole (a gRPC-Web request is one message: browsers send no
/// streams), then decoded; 413 past `max`, 400 when the filter refuses it.
pub(super) async fn filtered(
    body: RequestBody,
    mut filter: crate::middleware::body_filter::RequestBodyFilter,
    max: usize,
) -> Result<RequestBody, Failure> {
    let refused = |failed: crate::middleware::body_filter::FilterFailed| {
        Failure::new(StatusCode::BAD_REQUEST, failed.0)
    };
    match hold(body, max).await? {
        RequestBody::Held(bytes, trailers) => {
            let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
            filter.data(&bytes, &mut out).map_err(refused)?;
            filter.end().map_err(refused)?;
            Ok(RequestBody::Held(Bytes::from(out), trailers))
        }
        other => Ok(other),
    }
}
