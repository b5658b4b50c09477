//! `grpc_web`: gRPC-Web clients (browsers, connect-go's `WithGRPCWeb`)
//! to a gRPC server behind an HTTP/2 upstream (grpc/doc/PROTOCOL-WEB.md).
//! A request of `application/grpc-web[+codec]` goes upstream as
//! `application/grpc[+codec]` (the message framing is the same), one of
//! `application/grpc-web-text[+codec]` base64-decoded as it streams; the
//! answer's messages come back as they are (or base64-encoded, each
//! upstream read its own padded run, so a streamed message is not held
//! back), and its trailers as the last frame of the body (flag `0x80`,
//! `name: value\r\n` lines). A trailers-only answer (a gRPC error before
//! any message) keeps its status in its head. Any other request passes
//! untouched: native gRPC clients share the route.

mod text;

use std::sync::Arc;

use http::{header, HeaderMap, HeaderValue};

pub(crate) use text::Base64Decoder;

use super::{
    body_filter::{
        BodyFilterOffer, FilterFailed, RequestBodyFilter, RequestFilter, ResponseBodyFilter,
        ResponseFilter, Trailers,
    },
    build::{Build, Builder},
    Exchange, Flow, Handler, RequestView,
};
use crate::{
    config::GrpcWebSettings,
    wire::{edits::HeaderEdits, fields::Fields},
};

/// A `grpc_web` handler instance.
#[derive(Debug)]
pub(crate) struct GrpcWebTranslator;

impl Build for GrpcWebSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(GrpcWebTranslator))
    }
}

/// What a gRPC-Web request asked for: the text (base64) mode or not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offer {
    text: bool,
}

/// The gRPC content type a gRPC-Web one stands for, and whether it is
/// the text mode: `application/grpc-web-text+proto` is
/// (`application/grpc+proto`, true); `None` for anything else.
fn translated(content_type: &[u8]) -> Option<(HeaderValue, bool)> {
    let text = std::str::from_utf8(content_type).ok()?;
    let media = text.split(';').next()?.trim().to_ascii_lowercase();
    let rest = media.strip_prefix("application/grpc-web")?;
    let (text, codec) = match rest.strip_prefix("-text") {
        Some(codec) => (true, codec),
        None => (false, rest),
    };
    if !(codec.is_empty() || codec.starts_with('+') && codec.len() > 1) {
        return None;
    }
    let grpc = HeaderValue::from_str(&format!("application/grpc{codec}")).ok()?;
    Some((grpc, text))
}

impl Handler for GrpcWebTranslator {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let Some((grpc, text)) = request.header("content-type").and_then(translated) else {
            return Flow::Next;
        };
        let edits = &mut exchange.request_headers;
        edits.set(header::CONTENT_TYPE, grpc);
        if text {
            // The decoded body is shorter; HTTP/2 needs no length.
            edits.remove.push(header::CONTENT_LENGTH);
            exchange.request_filter = Some(RequestBodyFilter::new(Base64Decoder::default()));
        }
        exchange.body_filter = Some(Box::new(Offer { text }));
        Flow::Next
    }
}

/// A gRPC answer being written as gRPC-Web.
#[derive(Debug)]
pub(crate) struct GrpcWebResponse {
    text: bool,
}

impl Offer {
    /// At the response head: a gRPC answer gets the gRPC-Web content type
    /// and loses its length; `None` when nothing more is to do (not gRPC,
    /// or a trailers-only answer, whose status is in the head already).
    pub(crate) fn start(
        self,
        fields: Fields<'_>,
        empty: bool,
        edits: &mut HeaderEdits,
    ) -> Option<GrpcWebResponse> {
        let content_type = fields.get("content-type")?;
        let media = std::str::from_utf8(content_type)
            .ok()?
            .trim()
            .to_ascii_lowercase();
        let codec = media.strip_prefix("application/grpc")?;
        if !(codec.is_empty() || codec.starts_with('+')) {
            return None;
        }
        let mode = if self.text { "-text" } else { "" };
        let web = HeaderValue::from_str(&format!("application/grpc-web{mode}{codec}")).ok()?;
        edits.set(header::CONTENT_TYPE, web);
        edits.remove.push(header::CONTENT_LENGTH);
        (!empty).then_some(GrpcWebResponse { text: self.text })
    }
}

impl GrpcWebResponse {
    /// The client's bytes for `chunk`: as they are, or base64 (padded:
    /// the client decodes it as soon as it comes).
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        match self.text {
            true => text::encode(chunk, out),
            false => out.extend_from_slice(chunk),
        }
    }

    /// The trailers, as the body's last frame.
    pub(crate) fn end(&mut self, trailers: Option<&HeaderMap>, out: &mut Vec<u8>) -> Trailers {
        let frame = trailer_frame(trailers);
        self.data(&frame, out);
        Trailers::InBody
    }
}

impl BodyFilterOffer for Offer {
    fn at_head(
        self: Box<Self>,
        _status: http::StatusCode,
        fields: Fields<'_>,
        empty: bool,
        edits: &mut HeaderEdits,
    ) -> Option<ResponseBodyFilter> {
        self.start(fields, empty, edits)
            .map(ResponseBodyFilter::new)
    }
}

impl ResponseFilter for GrpcWebResponse {
    fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        GrpcWebResponse::data(self, chunk, out);
        Ok(())
    }

    fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<Trailers, FilterFailed> {
        Ok(GrpcWebResponse::end(self, trailers, out))
    }
}

impl RequestFilter for Base64Decoder {
    fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FilterFailed> {
        Base64Decoder::data(self, chunk, out)
            .map_err(|_| FilterFailed("the gRPC-Web text body is not base64"))
    }

    fn end(&mut self) -> Result<(), FilterFailed> {
        Base64Decoder::end(self)
            .map_err(|_| FilterFailed("the gRPC-Web text body ends inside a base64 group"))
    }
}

/// gRPC-Web's trailer frame: flag `0x80`, the length (4 bytes, big
/// endian), then `name: value\r\n` for each field (names in lower case,
/// as HTTP/2 has them).
pub(crate) fn trailer_frame(trailers: Option<&HeaderMap>) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in trailers.into_iter().flatten() {
        block.extend_from_slice(name.as_str().as_bytes());
        block.extend_from_slice(b": ");
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    let len = u32::try_from(block.len()).unwrap_or(u32::MAX);
    let mut frame = Vec::with_capacity(5 + block.len());
    frame.push(0x80);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&block);
    frame
}

#[cfg(test)]
mod tests;
