//! OTLP protobuf encoding of spans (opentelemetry-proto's
//! `ExportTraceServiceRequest`), written by hand: the few messages sluice
//! sends, on the exporter thread only (docs/OBSERVABILITY.md says why no
//! opentelemetry crate).

use super::{Span, Value};

/// Wire types.
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

fn key(out: &mut Vec<u8>, field: u8, wire: u8) {
    out.push(field << 3 | wire);
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn bytes(out: &mut Vec<u8>, field: u8, value: &[u8]) {
    key(out, field, LEN);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn fixed64(out: &mut Vec<u8>, field: u8, value: u64) {
    key(out, field, I64);
    out.extend_from_slice(&value.to_le_bytes());
}

/// A nested message: written into `scratch`, then as a length-delimited field.
fn message(out: &mut Vec<u8>, field: u8, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    write(&mut inner);
    bytes(out, field, &inner);
}

/// `KeyValue { key = 1; AnyValue value = 2 }`.
fn attribute(out: &mut Vec<u8>, field: u8, name: &str, value: &Value) {
    message(out, field, |kv| {
        bytes(kv, 1, name.as_bytes());
        message(kv, 2, |any| match value {
            Value::Str(s) => bytes(any, 1, s.as_bytes()),
            Value::Int(i) => {
                key(any, 3, VARINT);
                varint(any, *i as u64);
            }
        });
    });
}

/// `ExportTraceServiceRequest` with one resource and one scope.
pub(super) fn encode(resource: &[(String, String)], spans: &[Box<Span>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * spans.len() + 256);
    message(&mut out, 1, |rs| {
        // Resource { attributes = 1 }
        message(rs, 1, |r| {
            for (k, v) in resource {
                attribute(r, 1, k, &Value::Str(v.clone()));
            }
        });
        // ScopeSpans { scope = 1; spans = 2 }
        message(rs, 2, |ss| {
            message(ss, 1, |scope| {
                bytes(scope, 1, b"sluice");
                bytes(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for span in spans {
                message(ss, 2, |s| encode_span(s, span));
            }
        });
    });
    out
}

fn encode_span(out: &mut Vec<u8>, span: &Span) {
    bytes(out, 1, &span.context.trace_id.to_be_bytes());
    bytes(out, 2, &span.context.span_id.to_be_bytes());
    if let Some(parent) = span.parent {
        bytes(out, 4, &parent.to_be_bytes());
    }
    bytes(out, 5, span.name.as_bytes());
    key(out, 6, VARINT);
    varint(out, span.kind as u64);
    fixed64(out, 7, span.start);
    fixed64(out, 8, span.end);
    for (k, v) in &span.attributes {
        attribute(out, 9, k, v);
    }
    for event in &span.events {
        // Event { time_unix_nano = 1; name = 2; attributes = 3 }
        message(out, 11, |e| {
            fixed64(e, 1, event.time);
            bytes(e, 2, event.name.as_bytes());
            for (k, v) in &event.attributes {
                attribute(e, 3, k, v);
            }
        });
    }
    // Status { code = 3 }: ERROR (2) for failed requests, else UNSET.
    if span.error {
        message(out, 15, |status| {
            key(status, 3, VARINT);
            varint(status, 2);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        let mut out = Vec::new();
        attribute(&mut out, 9, "a", &Value::Int(1));
        // 9<<3|2, len 7: key "a" (0a 01 61), value (12 02 18 01).
        assert_eq!(out, [0x4a, 7, 0x0a, 1, b'a', 0x12, 2, 0x18, 1]);
    }
}
