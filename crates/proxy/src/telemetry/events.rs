//! Exchanges and connections that a guard or a peer cut short:
//! `sluice_guard_events_total{event}`, one counter per [`Event`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{Exposition, MetricKind};

/// What was cut short, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// An HTTP/2 client reset a stream before its response was complete;
    /// the upstream exchange was cancelled.
    StreamReset = 0,
    /// An HTTP/2 connection got GOAWAY (ENHANCE_YOUR_CALM) for too many
    /// premature resets (`http2.max_premature_resets`).
    ResetFlood,
    /// An HTTP/1.1 client closed its connection before its response was
    /// complete; the upstream connection was closed.
    ClientClosed,
    /// A client took no response bytes for `limits.send_timeout`.
    SendTimeout,
    /// An HTTP/2 client's request trailers were not sent to an HTTP/1.1
    /// upstream (the route does not forward them).
    TrailersDropped,
    /// A trailer field that the head rules control was removed.
    TrailerFieldRemoved,
    /// An upstream sent more interim (1xx) answers than allowed.
    InterimFlood,
    /// A connection on a `proxy_protocol` listener began with a PROXY
    /// header but came from a network not in `trusted`: closed.
    ProxyHeaderUntrusted,
    /// A connection from a trusted network began without one: closed.
    ProxyHeaderMissing,
    /// A malformed header (bad lengths, a bad line, a version the
    /// listener does not accept): closed.
    ProxyHeaderInvalid,
    /// The connection closed, or sent nothing more within
    /// `limits.header_read_timeout`, before a whole header: closed.
    ProxyHeaderIncomplete,
}

impl Event {
    pub(crate) const ALL: [Event; 11] = [
        Event::StreamReset,
        Event::ResetFlood,
        Event::ClientClosed,
        Event::SendTimeout,
        Event::TrailersDropped,
        Event::TrailerFieldRemoved,
        Event::InterimFlood,
        Event::ProxyHeaderUntrusted,
        Event::ProxyHeaderMissing,
        Event::ProxyHeaderInvalid,
        Event::ProxyHeaderIncomplete,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Event::StreamReset => "h2_stream_reset",
            Event::ResetFlood => "h2_reset_flood",
            Event::ClientClosed => "client_closed",
            Event::SendTimeout => "send_timeout",
            Event::TrailersDropped => "request_trailers_dropped",
            Event::TrailerFieldRemoved => "trailer_field_removed",
            Event::InterimFlood => "interim_flood",
            Event::ProxyHeaderUntrusted => "proxy_header_untrusted",
            Event::ProxyHeaderMissing => "proxy_header_missing",
            Event::ProxyHeaderInvalid => "proxy_header_invalid",
            Event::ProxyHeaderIncomplete => "proxy_header_incomplete",
        }
    }
}

/// One worker's counters.
pub(crate) type EventCells = [AtomicU64; Event::ALL.len()];

/// Appends the family, summing each event over `shards`.
pub(crate) fn render<'a>(
    out: &mut Exposition,
    shards: impl Iterator<Item = &'a EventCells> + Clone,
) {
    let mut family = out.family(
        "sluice_guard_events_total",
        MetricKind::Counter,
        "Exchanges and connections cut short by a guard or a peer, by event (docs/CONFIG.md).",
    );
    for event in Event::ALL {
        let n: u64 = shards
            .clone()
            .map(|cells| cells[event as usize].load(Relaxed))
            .sum();
        family.sample(&[("event", event.label())], n);
    }
}
