//! Response body transformations a handler asks for on the request and
//! the response's relay applies: `compress` (the body compressed) and
//! `grpc_web` (gRPC's trailers put in the body, base64 for the text
//! mode). Sans-IO, the same for every relay: the head in, its edits out;
//! each chunk of the upstream's body in, the bytes for the client out;
//! at the end the last bytes, and whether the trailers still go as
//! trailers. Each relay calls [`start`] once, where it writes the head.

use http::{HeaderMap, StatusCode};

use super::{
    compress::{self, Compression},
    Exchange,
};
use crate::wire::{edits::HeaderEdits, fields::Fields};

/// What a handler asked for on the request; the response decides.
#[derive(Debug)]
pub(crate) enum FilterOffer {
    Compress(compress::Offer),
}

/// A response body being transformed.
#[derive(Debug)]
pub(crate) enum ResponseBodyFilter {
    Compress(Compression),
}

/// A transformation failed (a compressor refused its input): the
/// response is cut short, as a broken upstream's would be.
#[derive(Debug)]
pub(crate) struct FilterFailed(pub &'static str);

/// What becomes of the upstream's trailers after [`ResponseBodyFilter::end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trailers {
    /// Sent as trailers, as without a filter.
    Pass,
    /// Written into the body: none go as trailers.
    InBody,
}

/// At the response head: the filter this response gets, if a handler of
/// its exchange asked for one and the response qualifies; its head
/// changes are added to `edits` (created when there were none). `empty`:
/// the upstream said the body is empty (an HTTP/2 end of stream on the
/// head). A response without a filter costs one `Option` check.
#[inline]
pub(crate) fn start(
    exchange: &mut Exchange,
    status: StatusCode,
    fields: Fields<'_>,
    empty: bool,
    edits: &mut Option<HeaderEdits>,
) -> Option<ResponseBodyFilter> {
    let offer = exchange.body_filter.take()?;
    started(offer, status, fields, empty, edits)
}

#[cold]
#[inline(never)]
fn started(
    offer: FilterOffer,
    status: StatusCode,
    fields: Fields<'_>,
    empty: bool,
    edits: &mut Option<HeaderEdits>,
) -> Option<ResponseBodyFilter> {
    let mut changes = edits.take().unwrap_or_default();
    let filter = match offer {
        FilterOffer::Compress(offer) => offer
            .start(status, fields, empty, &mut changes)
            .ok()
            .map(ResponseBodyFilter::Compress),
    };
    *edits = Some(changes).filter(|changes| !changes.is_empty());
    filter
}

impl ResponseBodyFilter {
    /// The client's bytes for `chunk` of the upstream's body, appended to `out`.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        match self {
            Self::Compress(compression) => compression
                .data(chunk, out)
                .map_err(|err| FilterFailed(err.0)),
        }
    }

    /// The body's last bytes, appended to `out`, once the upstream's body
    /// ended (with `trailers`, if any).
    pub(crate) fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed> {
        let _ = trailers;
        match self {
            Self::Compress(compression) => {
                compression.finish(out).map_err(|err| FilterFailed(err.0))?;
                Ok(Trailers::Pass)
            }
        }
    }
}
