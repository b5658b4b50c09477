//! OpenTelemetry spans (docs/OBSERVABILITY.md): the sampler, the span a
//! request fills in, and the bounded queue to the exporter thread
//! (`export`), which encodes them as OTLP (`otlp`). A request never waits
//! for the exporter: a span that finds the queue full is dropped and
//! counted (`sluice_trace_spans_dropped_total`), as are the spans of an
//! export that failed.

mod export;
mod otlp;

use std::{
    borrow::Cow,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        mpsc::{self, SyncSender, TrySendError},
    },
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use super::{Exposition, MetricKind};
use crate::config::{QueryPolicy, TraceExport};

/// Spans dropped: the queue was full, or their export failed. One for the
/// process: tracers come and go with reloads, the count goes on.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Spans the collector accepted.
static EXPORTED: AtomicU64 = AtomicU64::new(0);

/// Appends the tracing counters to the metrics page (process-wide: the
/// exporter is not a worker's).
pub(crate) fn render(out: &mut Exposition) {
    out.family(
        "sluice_trace_spans_dropped_total",
        MetricKind::Counter,
        "Spans not exported: the queue was full or the collector failed (docs/OBSERVABILITY.md).",
    )
    .sample(&[], DROPPED.load(Relaxed));
    out.family(
        "sluice_trace_spans_exported_total",
        MetricKind::Counter,
        "Spans the collector accepted.",
    )
    .sample(&[], EXPORTED.load(Relaxed));
}

/// Where a span sits in its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanContext {
    pub trace_id: u128,
    pub span_id: u64,
}

impl SpanContext {
    /// A child of this span, with a new id.
    pub(crate) fn child(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: fastrand::u64(1..),
        }
    }

    /// `00-TRACE-SPAN-01`: the W3C header naming this span as the parent.
    pub(crate) fn traceparent(&self) -> [u8; 55] {
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-01";
        write_hex(&mut out[3..35], self.trace_id);
        write_hex(&mut out[36..52], u128::from(self.span_id));
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    Server = 2,
    Client = 3,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
}

#[derive(Debug, Clone)]
pub(crate) struct SpanEvent {
    pub time: u64,
    pub name: &'static str,
    pub attributes: Vec<(&'static str, Value)>,
}

/// One span, filled in while its request runs, sent when it ends.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub context: SpanContext,
    pub parent: Option<u64>,
    pub name: String,
    pub kind: SpanKind,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    began: Instant,
    pub attributes: Vec<(&'static str, Value)>,
    pub events: Vec<SpanEvent>,
    pub error: bool,
}

impl Span {
    pub(crate) fn new(context: SpanContext, parent: Option<u64>, kind: SpanKind) -> Self {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            context,
            parent,
            name: String::new(),
            kind,
            start,
            end: start,
            began: Instant::now(),
            attributes: Vec::with_capacity(16),
            events: Vec::new(),
            error: false,
        }
    }

    pub(crate) fn set(&mut self, key: &'static str, value: Value) {
        match self.attributes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.attributes.push((key, value)),
        }
    }

    pub(crate) fn str(&mut self, key: &'static str, value: &[u8]) {
        self.set(key, Value::Str(String::from_utf8_lossy(value).into_owned()));
    }

    pub(crate) fn int(&mut self, key: &'static str, value: i64) {
        self.set(key, Value::Int(value));
    }

    /// The time since the span began, as a Unix time.
    pub(crate) fn now(&self) -> u64 {
        self.start + self.began.elapsed().as_nanos() as u64
    }

    pub(crate) fn event(&mut self, name: &'static str, attributes: Vec<(&'static str, Value)>) {
        let time = self.now();
        self.events.push(SpanEvent {
            time,
            name,
            attributes,
        });
    }

    /// Marks the end: the span is complete.
    pub(crate) fn end(&mut self) {
        self.end = self.now();
    }
}

/// The sampler and the queue to the exporter of one `traces:` setting.
#[derive(Debug)]
pub(crate) struct Tracer {
    pub settings: TraceExport,
    /// A new trace is sampled when a random u64 is below this.
    threshold: u64,
    queue: SyncSender<Box<Span>>,
}

impl Tracer {
    /// Starts the exporter thread (it ends when the tracer is dropped).
    pub(crate) fn start(settings: TraceExport) -> anyhow::Result<Self> {
        let tls = export::connector(&settings)?;
        let (queue, spans) = mpsc::sync_channel(settings.queue);
        export::spawn(settings.clone(), tls, spans)?;
        let threshold = if settings.ratio >= 1.0 {
            u64::MAX
        } else {
            (settings.ratio * u64::MAX as f64) as u64
        };
        Ok(Self {
            settings,
            threshold,
            queue,
        })
    }

    /// The context of a request's SERVER span, if it is sampled: a child
    /// of a valid `traceparent` that is (parent-based), else a new trace
    /// sampled at the ratio. The second value is the parent span's id.
    pub(crate) fn sample(&self, traceparent: Option<&[u8]>) -> Option<(SpanContext, Option<u64>)> {
        match traceparent.and_then(parse_traceparent) {
            Some((trace_id, parent, sampled)) => sampled.then(|| {
                (
                    SpanContext {
                        trace_id,
                        span_id: fastrand::u64(1..),
                    },
                    Some(parent),
                )
            }),
            None => (self.threshold == u64::MAX || fastrand::u64(..) < self.threshold).then(|| {
                (
                    SpanContext {
                        trace_id: fastrand::u128(1..),
                        span_id: fastrand::u64(1..),
                    },
                    None,
                )
            }),
        }
    }

    /// A request's query as spans record it (`traces.query`): each value
    /// written `REDACTED` (the default), as sent, or `None` (omitted).
    /// The SERVER span's `url.query` and the CLIENT span's `url.full`
    /// both take it from here, so the two never disagree.
    pub(crate) fn query<'q>(&self, query: &'q [u8]) -> Option<Cow<'q, [u8]>> {
        match self.settings.query {
            QueryPolicy::Full => Some(Cow::Borrowed(query)),
            QueryPolicy::Redacted => Some(Cow::Owned(redacted(query))),
            QueryPolicy::Omitted => None,
        }
    }

    /// Queues a finished span; never waits.
    pub(crate) fn send(&self, span: Box<Span>) {
        match self.queue.try_send(span) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Trace id, parent span id and the sampled flag of a valid W3C
/// `traceparent` (version 00, lower-case hex, ids not all zeros).
pub(crate) fn parse_traceparent(value: &[u8]) -> Option<(u128, u64, bool)> {
    if value.len() != 55 || !value.starts_with(b"00-") || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let hex = |bytes: &[u8]| -> Option<u128> {
        bytes.iter().try_fold(0u128, |acc, &b| {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return None,
            };
            Some(acc << 4 | u128::from(digit))
        })
    };
    let trace = hex(&value[3..35]).filter(|&t| t != 0)?;
    let parent = hex(&value[36..52]).filter(|&p| p != 0)? as u64;
    let flags = hex(&value[53..55])?;
    Some((trace, parent, flags & 1 == 1))
}

/// Each value of `a=1&b=2` as `REDACTED` (the keys stay).
fn redacted(query: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(query.len());
    for (i, pair) in query.split(|&b| b == b'&').enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        match pair.iter().position(|&b| b == b'=') {
            Some(eq) => {
                out.extend_from_slice(&pair[..=eq]);
                out.extend_from_slice(b"REDACTED");
            }
            None => out.extend_from_slice(pair),
        }
    }
    out
}

fn write_hex(out: &mut [u8], value: u128) {
    let digits = out.len();
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = b"0123456789abcdef"[((value >> ((digits - 1 - i) * 4)) & 0xF) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_redacted_keys_kept() {
        assert_eq!(redacted(b"a=1&b&c=x=y"), b"a=REDACTED&b&c=REDACTED");
        assert_eq!(redacted(b""), b"");
    }

    #[test]
    fn traceparents_round_trip() {
        let context = SpanContext {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 0x00f067aa0ba902b7,
        };
        let text = context.traceparent();
        assert_eq!(
            &text[..],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(
            parse_traceparent(&text),
            Some((context.trace_id, context.span_id, true))
        );
        assert_eq!(
            parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
            Some((context.trace_id, context.span_id, false))
        );
        assert_eq!(
            parse_traceparent(b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            parse_traceparent(b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
    }
}
