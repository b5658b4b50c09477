//! Body transformations a handler asks for on the request and the
//! relays apply: `compress` (the response body compressed) and
//! `grpc_web` (gRPC's trailers put in the response body; base64 both
//! ways for the text mode). Sans-IO, the same for every relay: the head in, its edits out;
//! each chunk of the upstream's body in, the bytes for the client out;
//! at the end the last bytes, and whether the trailers still go as
//! trailers. Each relay calls [`start`] once, where it writes the head.
//! The handlers implement the traits below in their own files; this
//! module names none of them.

use std::fmt;

use http::{HeaderMap, StatusCode};

use super::Exchange;
use crate::wire::{edits::HeaderEdits, fields::Fields};

/// What a handler asked for on the request; the response decides.
pub(crate) type FilterOffer = Box<dyn BodyFilterOffer>;

/// A handler's offer to transform the response body (`compress`'s
/// coding, `grpc_web`'s framing), made on the request.
pub(crate) trait BodyFilterOffer: Send + Sync + fmt::Debug {
    /// At the response head (`empty`: the upstream said the body is
    /// empty): the filter this response gets, its head changes in
    /// `edits`; `None` when it gets none.
    fn at_head(
        self: Box<Self>,
        status: StatusCode,
        fields: Fields<'_>,
        empty: bool,
        edits: &mut HeaderEdits,
    ) -> Option<ResponseBodyFilter>;
}

/// A response body transformation: chunk in, bytes out; at the end, the
/// last bytes and what becomes of the trailers.
pub(crate) trait ResponseFilter: Send + fmt::Debug {
    /// The client's bytes for `chunk` of the upstream's body, appended to `out`.
    fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed>;

    /// The body's last bytes, appended to `out`, once the upstream's body
    /// ended (with `trailers`, if any).
    fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed>;
}

/// A response body being transformed.
#[derive(Debug)]
pub(crate) struct ResponseBodyFilter(Box<dyn ResponseFilter>);

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
    let filter = offer.at_head(status, fields, empty, &mut changes);
    *edits = Some(changes).filter(|changes| !changes.is_empty());
    filter
}

impl ResponseBodyFilter {
    pub(crate) fn new(filter: impl ResponseFilter + 'static) -> Self {
        Self(Box::new(filter))
    }

    /// The client's bytes for `chunk` of the upstream's body, appended to `out`.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        self.0.data(chunk, out)
    }

    /// The body's last bytes, appended to `out`, once the upstream's body
    /// ended (with `trailers`, if any).
    pub(crate) fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed> {
        self.0.end(trailers, out)
    }
}

/// A request body transformation a handler asked for (gRPC-Web's text
/// mode, base64-decoded as it streams). The request's body paths toward
/// HTTP/2 upstreams apply it (`session/h1/to_h2.rs` for HTTP/1.1
/// clients, `session/h2/mod.rs` for HTTP/2 and HTTP/3 ones).
pub(crate) trait RequestFilter: Send + fmt::Debug {
    /// The upstream's bytes for `chunk` of the client's body, appended to `out`.
    fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed>;

    /// The client's body ended.
    fn end(&mut self) -> Result<(), FilterFailed>;
}

/// A request body being transformed.
#[derive(Debug)]
pub(crate) struct RequestBodyFilter(Box<dyn RequestFilter>);

impl RequestBodyFilter {
    pub(crate) fn new(filter: impl RequestFilter + 'static) -> Self {
        Self(Box::new(filter))
    }

    /// The upstream's bytes for `chunk` of the client's body, appended to `out`.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        self.0.data(chunk, out)
    }

    /// The client's body ended.
    pub(crate) fn end(&mut self) -> Result<(), FilterFailed> {
        self.0.end()
    }
}

#[cfg(test)]
mod tests {
    use http::{header, HeaderValue};

    use super::*;

    /// Offers to upper-case a `text/plain` answer's body, and to put the
    /// trailers' count at its end.
    #[derive(Debug)]
    struct UpperOffer;

    #[derive(Debug)]
    struct Upper;

    impl BodyFilterOffer for UpperOffer {
        fn at_head(
            self: Box<Self>,
            status: StatusCode,
            fields: Fields<'_>,
            _empty: bool,
            edits: &mut HeaderEdits,
        ) -> Option<ResponseBodyFilter> {
            edits.remove.push(header::CONTENT_LENGTH);
            let plain = fields.get("content-type") == Some(&b"text/plain"[..]);
            (status == StatusCode::OK && plain).then(|| ResponseBodyFilter::new(Upper))
        }
    }

    impl ResponseFilter for Upper {
        fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
            if chunk.contains(&0) {
                return Err(FilterFailed("a NUL"));
            }
            out.extend(chunk.to_ascii_uppercase());
            Ok(())
        }

        fn end(
            &mut self,
            trailers: Option<&HeaderMap>,
            out: &mut Vec<u8>,
        ) -> Result<Trailers, FilterFailed> {
            out.extend(format!("|{}", trailers.map_or(0, HeaderMap::len)).bytes());
            Ok(Trailers::InBody)
        }
    }

    fn head(content_type: &'static str) -> HeaderMap {
        let mut head = HeaderMap::new();
        head.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        head
    }

    #[test]
    fn an_offer_is_taken_once_and_its_filter_transforms_the_body() {
        let mut exchange = Exchange {
            body_filter: Some(Box::new(UpperOffer)),
            ..Exchange::default()
        };
        let fields = head("text/plain");
        let mut edits = None;
        let mut filter = start(
            &mut exchange,
            StatusCode::OK,
            Fields::Map(&fields),
            false,
            &mut edits,
        )
        .expect("a text/plain 200 is filtered");
        assert!(exchange.body_filter.is_none(), "the offer is taken");
        assert_eq!(edits.unwrap().remove, [header::CONTENT_LENGTH]);
        let mut out = Vec::new();
        filter.data(b"hello ", &mut out).unwrap();
        filter.data(b"world", &mut out).unwrap();
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        assert_eq!(
            filter.end(Some(&trailers), &mut out).unwrap(),
            Trailers::InBody
        );
        assert_eq!(out, b"HELLO WORLD|1");
        assert_eq!(filter.data(b"a\0", &mut out).unwrap_err().0, "a NUL");
        // Taken: the next response of the exchange gets none.
        let mut edits = None;
        assert!(start(
            &mut exchange,
            StatusCode::OK,
            Fields::Map(&fields),
            false,
            &mut edits
        )
        .is_none());
        assert!(edits.is_none(), "no offer, no edits");
    }

    #[test]
    fn a_declined_offer_still_gives_its_head_changes() {
        let mut exchange = Exchange {
            body_filter: Some(Box::new(UpperOffer)),
            ..Exchange::default()
        };
        let fields = head("application/json");
        let mut edits = None;
        let filter = start(
            &mut exchange,
            StatusCode::OK,
            Fields::Map(&fields),
            false,
            &mut edits,
        );
        assert!(filter.is_none());
        assert_eq!(edits.unwrap().remove, [header::CONTENT_LENGTH]);
    }
}
