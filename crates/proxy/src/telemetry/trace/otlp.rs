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

fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The size of a length-delimited field (one-byte key) of `len` bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// The key and length of a nested message of `len` bytes; its fields follow.
fn open(out: &mut Vec<u8>, field: u8, len: usize) {
    key(out, field, LEN);
    varint(out, len as u64);
}

fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Str(s) => field_len(s.len()),
        Value::Int(i) => 1 + varint_len(*i as u64),
    }
}

fn attribute_len(name: &str, value: &Value) -> usize {
    field_len(name.len()) + field_len(any_value_len(value))
}

/// `KeyValue { key = 1; AnyValue value = 2 }`. Sizes are worked out
/// before writing (no buffer per nested message, no copies).
fn attribute(out: &mut Vec<u8>, field: u8, name: &str, value: &Value) {
    open(out, field, attribute_len(name, value));
    bytes(out, 1, name.as_bytes());
    open(out, 2, any_value_len(value));
    match value {
        Value::Str(s) => bytes(out, 1, s.as_bytes()),
        Value::Int(i) => {
            key(out, 3, VARINT);
            varint(out, *i as u64);
        }
    }
}

const SCOPE_NAME: &[u8] = b"sluice";
const SCOPE_VERSION: &[u8] = env!("CARGO_PKG_VERSION").as_bytes();

/// `ExportTraceServiceRequest` with one resource and one scope.
pub(super) fn encode(resource: &[(String, String)], spans: &[Box<Span>]) -> Vec<u8> {
    let resource: Vec<(&str, Value)> = resource
        .iter()
        .map(|(k, v)| (k.as_str(), Value::Str(v.clone())))
        .collect();
    let resource_len: usize = resource
        .iter()
        .map(|(k, v)| field_len(attribute_len(k, v)))
        .sum();
    let span_lens: Vec<usize> = spans.iter().map(|s| span_len(s)).collect();
    let scope_len = field_len(SCOPE_NAME.len()) + field_len(SCOPE_VERSION.len());
    let scope_spans_len =
        field_len(scope_len) + span_lens.iter().map(|&l| field_len(l)).sum::<usize>();
    let resource_spans_len = field_len(resource_len) + field_len(scope_spans_len);
    let mut out = Vec::with_capacity(field_len(resource_spans_len));
    open(&mut out, 1, resource_spans_len);
    // Resource { attributes = 1 }
    open(&mut out, 1, resource_len);
    for (k, v) in &resource {
        attribute(&mut out, 1, k, v);
    }
    // ScopeSpans { scope = 1; spans = 2 }
    open(&mut out, 2, scope_spans_len);
    open(&mut out, 1, scope_len);
    bytes(&mut out, 1, SCOPE_NAME);
    bytes(&mut out, 2, SCOPE_VERSION);
    for (span, &len) in spans.iter().zip(&span_lens) {
        open(&mut out, 2, len);
        encode_span(&mut out, span);
    }
    out
}

fn event_len(event: &super::SpanEvent) -> usize {
    9 + field_len(event.name.len())
        + event
            .attributes
            .iter()
            .map(|(k, v)| field_len(attribute_len(k, v)))
            .sum::<usize>()
}

/// Status { code = 3 }: ERROR (2).
const STATUS_ERROR: [u8; 2] = [3 << 3, 2];

fn span_len(span: &Span) -> usize {
    field_len(16)
        + field_len(8)
        + span.parent.map_or(0, |_| field_len(8))
        + field_len(span.name.len())
        + 2
        + 9
        + 9
        + span
            .attributes
            .iter()
            .map(|(k, v)| field_len(attribute_len(k, v)))
            .sum::<usize>()
        + span
            .events
            .iter()
            .map(|e| field_len(event_len(e)))
            .sum::<usize>()
        + if span.error {
            field_len(STATUS_ERROR.len())
        } else {
            0
        }
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
        open(out, 11, event_len(event));
        fixed64(out, 1, event.time);
        bytes(out, 2, event.name.as_bytes());
        for (k, v) in &event.attributes {
            attribute(out, 3, k, v);
        }
    }
    if span.error {
        bytes(out, 15, &STATUS_ERROR);
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
        for n in [0, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut out = Vec::new();
            varint(&mut out, n);
            assert_eq!(out.len(), varint_len(n), "{n}");
        }
    }

    #[test]
    fn sizes_worked_out_are_the_sizes_written() {
        let mut span = Span::new(
            super::super::SpanContext {
                trace_id: 1,
                span_id: 2,
            },
            Some(3),
            super::super::SpanKind::Server,
        );
        span.name = "GET /".into();
        span.int("n", -1);
        span.str("s", &[b'x'; 300]);
        span.event("e", vec![("k", Value::Int(429))]);
        span.error = true;
        let mut out = Vec::new();
        encode_span(&mut out, &span);
        assert_eq!(out.len(), span_len(&span));
        let whole = encode(&[("service.name".into(), "a".into())], &[Box::new(span)]);
        // The outer length is the rest of the message.
        let mut rest = &whole[1..];
        let mut len = 0u64;
        let mut shift = 0;
        while let Some((&b, tail)) = rest.split_first() {
            len |= u64::from(b & 0x7f) << shift;
            shift += 7;
            rest = tail;
            if b < 0x80 {
                break;
            }
        }
        assert_eq!(len as usize, rest.len());
    }
}
