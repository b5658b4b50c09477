//! Which responses are compressed, what that changes in their head, and
//! the body compressed as it streams (sans-IO: bytes in, bytes out).
//!
//! Never compressed: a response to HEAD, a 1xx, 204, 206 or 304, one that
//! already has `Content-Encoding`, one with `Cache-Control: no-transform`,
//! one whose type is not listed (gRPC never is), `text/event-stream`
//! unless configured, one whose Content-Length is under `min_size`, and
//! one the memory budget has no room for. A response that could have been
//! compressed gets `Vary: Accept-Encoding` whatever the client took; one
//! that is loses its Content-Length and Accept-Ranges, and a strong ETag
//! becomes weak (the bytes differ; the meaning does not).

use std::sync::{atomic::Ordering::Relaxed, Arc};

use http::{header, HeaderValue, StatusCode};

use super::{
    budget::Reservation,
    encoder::{EncodeError, Encoder},
    Policy,
};
use crate::middleware::body_filter::{
    BodyFilterOffer, FilterFailed, ResponseBodyFilter, ResponseFilter, Trailers,
};
use crate::{
    config::Encoding,
    wire::{edits::HeaderEdits, fields::Fields},
};

/// What the request phase decided: the coding the client takes best, if
/// any (`None`: the response may still get `Vary`).
#[derive(Debug)]
pub(crate) struct Offer {
    pub(super) policy: Arc<Policy>,
    pub(super) encoding: Option<Encoding>,
    /// The request was a HEAD: its answer has no body to compress.
    pub(super) head: bool,
}

/// A response being compressed: its compressor and its share of the budget.
#[derive(Debug)]
pub(crate) struct Compression {
    encoder: Encoder,
    reservation: Reservation,
    policy: Arc<Policy>,
    encoding: Encoding,
    bytes_in: u64,
    bytes_out: u64,
}

/// Why a response is not compressed (the unit tests name the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    NoBody,
    Encoded,
    NoTransform,
    Type,
    Small,
    /// Eligible, but the client takes no coding offered.
    NotAccepted,
    Memory,
}

impl Offer {
    /// At the response head (`empty`: the upstream said the body is
    /// empty): the compression this response gets, its head changes in
    /// `edits`; or why it gets none.
    pub(crate) fn start(
        self,
        status: StatusCode,
        fields: Fields<'_>,
        empty: bool,
        edits: &mut HeaderEdits,
    ) -> Result<Compression, Skip> {
        let policy = &self.policy;
        let no_body = self.head
            || empty
            || status.is_informational()
            || matches!(status.as_u16(), 204 | 206 | 304);
        if no_body {
            return Err(Skip::NoBody);
        }
        if fields.get("content-encoding").is_some() {
            return Err(Skip::Encoded);
        }
        let no_transform = fields.get_all("cache-control").any(|value| {
            value
                .split(|&b| b == b',')
                .any(|d| http1::request::trim(d).eq_ignore_ascii_case(b"no-transform"))
        });
        if no_transform {
            return Err(Skip::NoTransform);
        }
        if !fields
            .get("content-type")
            .is_some_and(|t| policy.compresses(t))
        {
            return Err(Skip::Type);
        }
        let length = fields
            .get("content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
        if length.is_some_and(|len| len < policy.min_size) {
            return Err(Skip::Small);
        }
        // Eligible: caches must keep the codings apart.
        vary(fields, edits);
        let Some(encoding) = self.encoding else {
            return Err(Skip::NotAccepted);
        };
        let Some(reservation) = policy.budget.reserve(policy.cost(encoding)) else {
            return Err(Skip::Memory);
        };
        let encoder = Encoder::new(encoding, &policy.levels, length).map_err(|_| Skip::Memory)?;
        edits.set(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(encoding.token()),
        );
        edits.remove.push(header::CONTENT_LENGTH);
        edits.remove.push(header::ACCEPT_RANGES);
        if let Some(etag) = fields.get("etag").filter(|tag| tag.starts_with(b"\"")) {
            if let Ok(weak) = HeaderValue::from_bytes(&[b"W/", etag].concat()) {
                edits.set(header::ETAG, weak);
            }
        }
        Ok(Compression {
            encoder,
            reservation,
            policy: Arc::clone(policy),
            encoding,
            bytes_in: 0,
            bytes_out: 0,
        })
    }
}

/// Adds `Vary: Accept-Encoding` unless the response's own `Vary` says it
/// (or says `*`).
fn vary(fields: Fields<'_>, edits: &mut HeaderEdits) {
    let covered = fields.get_all("vary").any(|value| {
        value.split(|&b| b == b',').any(|name| {
            let name = http1::request::trim(name);
            name == b"*" || name.eq_ignore_ascii_case(b"accept-encoding")
        })
    });
    if !covered {
        edits
            .add
            .push((header::VARY, HeaderValue::from_static("accept-encoding")));
    }
}

impl Compression {
    /// Compresses `chunk` into `out`, flushed: what the client can decode
    /// of the body so far.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let before = out.len();
        self.encoder.flush(chunk, out)?;
        self.count(chunk.len(), out.len() - before);
        Ok(())
    }

    /// Ends the compressed stream into `out`.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let before = out.len();
        self.encoder.finish(&[], out)?;
        self.count(0, out.len() - before);
        Ok(())
    }

    fn count(&mut self, read: usize, written: usize) {
        self.bytes_in += read as u64;
        self.bytes_out += written as u64;
        let held = self.encoder.memory();
        if held > 0 {
            self.reservation
                .follow(held + super::budget::OUTPUT_ALLOWANCE);
        }
    }
}

impl BodyFilterOffer for Offer {
    fn at_head(
        self: Box<Self>,
        status: StatusCode,
        fields: Fields<'_>,
        empty: bool,
        edits: &mut HeaderEdits,
    ) -> Option<ResponseBodyFilter> {
        let compression = self.start(status, fields, empty, edits).ok()?;
        Some(ResponseBodyFilter::new(compression))
    }
}

impl ResponseFilter for Compression {
    fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        Compression::data(self, chunk, out).map_err(|err| FilterFailed(err.0))
    }

    fn end(
        &mut self,
        _trailers: Option<&http::HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed> {
        self.finish(out).map_err(|err| FilterFailed(err.0))?;
        Ok(Trailers::Pass)
    }
}

impl Drop for Compression {
    fn drop(&mut self) {
        let counters = &self.policy.counters;
        counters.compressed[self.encoding as usize].fetch_add(1, Relaxed);
        counters.bytes_in.fetch_add(self.bytes_in, Relaxed);
        counters.bytes_out.fetch_add(self.bytes_out, Relaxed);
    }
}
