//! `correlation`: an id that follows a request through every service.
//! X-Correlation-Id is kept when the client sent a sane one, else made up;
//! X-Traceability-Id passes as is; a W3C `traceparent` is continued with a
//! new span id, or started.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};

use super::{
    build::{Build, Builder},
    Exchange, Flow, Handler, RequestView,
};
use crate::config::CorrelationSettings;

/// Longer client-sent ids are replaced: they end up in every log line.
const MAX_ID: usize = 128;
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

#[derive(Debug)]
pub(crate) struct CorrelationTagger {
    header: HeaderName,
    traceability: HeaderName,
    generate: bool,
    traceparent: bool,
    echo: bool,
}

impl Build for CorrelationSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(CorrelationTagger {
            header: self.header.0.clone(),
            traceability: self.traceability_header.0.clone(),
            generate: self.generate,
            traceparent: self.traceparent,
            echo: self.echo,
        }))
    }
}

impl Handler for CorrelationTagger {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let sent = request
            .header(self.header.as_str())
            .filter(|id| is_sane_id(id))
            .and_then(|id| HeaderValue::from_bytes(id).ok());
        let id = match sent {
            Some(id) => Some(id),
            None if self.generate => {
                let id = HeaderValue::from_bytes(&uuid_v4(fastrand::u128(..)))
                    .unwrap_or(HeaderValue::from_static("-"));
                exchange
                    .request_headers
                    .set(self.header.clone(), id.clone());
                Some(id)
            }
            None => None,
        };
        exchange.correlation_id = id;
        exchange.traceability_id = request
            .header(self.traceability.as_str())
            .filter(|id| is_sane_id(id))
            .and_then(|id| HeaderValue::from_bytes(id).ok());
        if self.traceparent {
            let parent = request.header(TRACEPARENT.as_str());
            let next = next_traceparent(parent, fastrand::u128(..), fastrand::u64(1..));
            if let Ok(value) = HeaderValue::from_bytes(&next) {
                exchange.request_headers.set(TRACEPARENT, value.clone());
                exchange.traceparent = Some(value);
            }
        }
        Flow::Next
    }

    fn response(&self, _status: http::StatusCode, exchange: &mut Exchange) {
        if self.echo {
            if let Some(id) = exchange.correlation_id.clone() {
                exchange.response_headers.set(self.header.clone(), id);
            }
        }
    }
}

/// Visible ASCII, not too long: safe to forward and to log.
fn is_sane_id(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_ID && id.iter().all(|b| b.is_ascii_graphic())
}

/// A random UUID (version 4, RFC 9562) as 36 ASCII bytes.
fn uuid_v4(random: u128) -> [u8; 36] {
    let value = (random & !(0xF << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let mut out = [b'-'; 36];
    let mut nibble = 32;
    for (i, byte) in out.iter_mut().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            continue;
        }
        nibble -= 1;
        *byte = hex_digit((value >> (nibble * 4)) as u8 & 0xF);
    }
    out
}

/// `00-TRACE-SPAN-FLAGS` continuing a valid `parent` with span id `span`,
/// or starting trace `trace` (unsampled: this proxy records no spans).
pub(crate) fn next_traceparent(parent: Option<&[u8]>, trace: u128, span: u64) -> [u8; 55] {
    let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
    match parent.filter(|p| is_traceparent(p)) {
        Some(parent) => {
            out[3..35].copy_from_slice(&parent[3..35]);
            out[53..55].copy_from_slice(&parent[53..55]);
        }
        None => write_hex(&mut out[3..35], trace.max(1)),
    }
    write_hex(&mut out[36..52], u128::from(span.max(1)));
    out
}

/// Version 00, lower-case hex, trace and parent ids not all zeros.
pub(crate) fn is_traceparent(value: &[u8]) -> bool {
    let hex = |range: std::ops::Range<usize>| {
        value[range.clone()]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            && value[range].iter().any(|&b| b != b'0')
    };
    value.len() == 55
        && value.starts_with(b"00-")
        && value[35] == b'-'
        && value[52] == b'-'
        && hex(3..35)
        && hex(36..52)
        && value[53..55]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

fn write_hex(out: &mut [u8], value: u128) {
    let digits = out.len();
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = hex_digit((value >> ((digits - 1 - i) * 4)) as u8 & 0xF);
    }
}

fn hex_digit(nibble: u8) -> u8 {
    b"0123456789abcdef"[usize::from(nibble & 0xF)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let id = uuid_v4(u128::MAX);
        let text = std::str::from_utf8(&id).unwrap();
        assert_eq!(text, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let id = uuid_v4(0);
        assert_eq!(
            std::str::from_utf8(&id).unwrap(),
            "00000000-0000-4000-8000-000000000000"
        );
    }

    #[test]
    fn traceparent_is_continued_or_started() {
        let parent = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let next = next_traceparent(Some(parent), 7, 0xabc);
        assert_eq!(
            std::str::from_utf8(&next).unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000abc-01"
        );
        // Invalid parents (upper case, zero ids, wrong version) start a new trace.
        for bad in [
            &b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"[..],
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"garbage",
        ] {
            let next = next_traceparent(Some(bad), 0x1234, 1);
            assert_eq!(
                std::str::from_utf8(&next).unwrap(),
                "00-00000000000000000000000000001234-0000000000000001-00"
            );
        }
    }

    #[test]
    fn only_sane_ids_are_kept() {
        assert!(is_sane_id(b"abc-123"));
        assert!(!is_sane_id(b""));
        assert!(!is_sane_id(b"a b"));
        assert!(!is_sane_id(b"a\x01"));
        assert!(!is_sane_id(&[b'a'; 129]));
    }
}
