//! Body transformations a handler asks for on the request and the
//! relays apply: `compress` (the response body compressed) and
//! `grpc_web` (gRPC's trailers put in the response body; base64 both
//! ways for the text mode). Sans-IO, the same for every relay: the head in, its edits out;
//! each chunk of the upstream's body in, the bytes for the client out;
//! at the end the last bytes, and whether the trailers still go as
//! trailers. Each relay calls [`start`] once, where it writes the head.

use http::{HeaderMap, StatusCode};

use super::{
    compress::{self, Compression},
    grpc_web::{self, Base64Decoder, GrpcWebResponse},
    Exchange,
};
use crate::wire::{edits::HeaderEdits, fields::Fields};

/// What a handler asked for on the request; the response decides.
#[derive(Debug)]
pub(crate) enum FilterOffer {
    Compress(compress::Offer),
    GrpcWeb(grpc_web::Offer),
}

/// A response body being transformed.
#[derive(Debug)]
pub(crate) enum ResponseBodyFilter {
    Compress(Compression),
    GrpcWeb(GrpcWebResponse),
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
        FilterOffer::GrpcWeb(offer) => offer
            .start(fields, empty, &mut changes)
            .map(ResponseBodyFilter::GrpcWeb),
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
            Self::GrpcWeb(web) => {
                web.data(chunk, out);
                Ok(())
            }
        }
    }

    /// The body's last bytes, appended to `out`, once the upstream's body
    /// ended (with `trailers`, if any).
    pub(crate) fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed> {
        match self {
            Self::Compress(compression) => {
                compression.finish(out).map_err(|err| FilterFailed(err.0))?;
                Ok(Trailers::Pass)
            }
            Self::GrpcWeb(web) => Ok(web.end(trailers, out)),
        }
    }
}

/// A request body transformation a handler asked for: gRPC-Web's text
/// mode, base64-decoded as it streams. The request's body paths toward
/// HTTP/2 upstreams apply it (`session/upstream_h2.rs` for HTTP/1.1
/// clients, `session/h2/mod.rs` for HTTP/2 and HTTP/3 ones).
#[derive(Debug)]
pub(crate) enum RequestBodyFilter {
    Base64(Base64Decoder),
}

impl RequestBodyFilter {
    /// The upstream's bytes for `chunk` of the client's body, appended to `out`.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        match self {
            Self::Base64(decoder) => decoder
                .data(chunk, out)
                .map_err(|_| FilterFailed("the gRPC-Web text body is not base64")),
        }
    }

    /// The client's body ended.
    pub(crate) fn end(&mut self) -> Result<(), FilterFailed> {
        match self {
            Self::Base64(decoder) => decoder
                .end()
                .map_err(|_| FilterFailed("the gRPC-Web text body ends inside a base64 group")),
        }
    }
}
