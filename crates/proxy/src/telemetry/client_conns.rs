//! Client connections and their streams, per worker: open and parked
//! connections (gauges), failed TLS handshakes, HTTP/2 streams and
//! protocol errors, HTTP/3 connections and streams.
//!
//! An HTTP/3 connection reaches the HTTP/2 codec through an in-process
//! HTTP/2 connection (server/h3): its requests are counted once, as HTTP/3
//! streams, not again as HTTP/2 ones.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use super::{Exposition, MetricKind, Metrics, Shard};

/// One worker's counters.
#[derive(Debug, Default)]
pub(crate) struct ClientCells {
    open: AtomicI64,
    /// Of those, the ones parked (idle, without a task).
    parked: AtomicI64,
    tls_handshake_failures: AtomicU64,
    h2_streams: AtomicU64,
    /// Connections ended by GOAWAY for a protocol error.
    h2_connection_errors: AtomicU64,
    /// QUIC connections whose HTTP/3 setup completed.
    h3_connections: AtomicU64,
    h3_streams: AtomicU64,
    /// QUIC datagrams this worker received for another worker's
    /// connection and handed to it (server/h3/steer.rs).
    h3_datagrams_steered: AtomicU64,
}

impl Shard {
    pub(crate) fn connection_opened(&self) {
        self.clients.open.fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.clients.open.fetch_sub(1, Relaxed);
    }

    /// Connections parked (`change` 1) or taken out of the lot (-1).
    pub(crate) fn connections_parked(&self, change: i64) {
        self.clients.parked.fetch_add(change, Relaxed);
    }

    /// A TLS handshake, over TCP or inside QUIC, failed or timed out.
    pub(crate) fn tls_handshake_failed(&self) {
        self.clients.tls_handshake_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn h2_stream(&self) {
        self.clients.h2_streams.fetch_add(1, Relaxed);
    }

    pub(crate) fn h2_connection_error(&self) {
        self.clients.h2_connection_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn h3_connection(&self) {
        self.clients.h3_connections.fetch_add(1, Relaxed);
    }

    pub(crate) fn h3_stream(&self) {
        self.clients.h3_streams.fetch_add(1, Relaxed);
    }

    pub(crate) fn h3_datagram_steered(&self) {
        self.clients.h3_datagrams_steered.fetch_add(1, Relaxed);
    }
}

impl Metrics {
    /// Connections open to clients, summed over workers.
    pub(crate) fn open_connections(&self) -> i64 {
        self.shards
            .iter()
            .map(|s| s.clients.open.load(Relaxed))
            .sum()
    }

    /// Of those, the ones parked.
    pub(crate) fn parked_connections(&self) -> i64 {
        self.shards
            .iter()
            .map(|s| s.clients.parked.load(Relaxed))
            .sum()
    }

    /// A counter of each worker, in worker order (how HTTP/3 connections
    /// spread over the workers' endpoints).
    pub(crate) fn per_worker(&self, counter: ClientCounter) -> Vec<u64> {
        self.shards
            .iter()
            .map(|s| counter.cell(&s.clients).load(Relaxed))
            .collect()
    }

    /// A counter summed over workers, for the admin's `/stats.json`.
    pub(crate) fn client_counter(&self, counter: ClientCounter) -> u64 {
        self.shards
            .iter()
            .map(|s| counter.cell(&s.clients).load(Relaxed))
            .sum()
    }
}

/// The counters among [`ClientCells`] (the gauges have their own getters).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ClientCounter {
    TlsHandshakeFailures,
    H2Streams,
    H2ConnectionErrors,
    H3Connections,
    H3Streams,
    H3DatagramsSteered,
}

impl ClientCounter {
    const ALL: [ClientCounter; 6] = [
        ClientCounter::TlsHandshakeFailures,
        ClientCounter::H2Streams,
        ClientCounter::H2ConnectionErrors,
        ClientCounter::H3Connections,
        ClientCounter::H3Streams,
        ClientCounter::H3DatagramsSteered,
    ];

    fn cell(self, cells: &ClientCells) -> &AtomicU64 {
        match self {
            ClientCounter::TlsHandshakeFailures => &cells.tls_handshake_failures,
            ClientCounter::H2Streams => &cells.h2_streams,
            ClientCounter::H2ConnectionErrors => &cells.h2_connection_errors,
            ClientCounter::H3Connections => &cells.h3_connections,
            ClientCounter::H3Streams => &cells.h3_streams,
            ClientCounter::H3DatagramsSteered => &cells.h3_datagrams_steered,
        }
    }

    /// The Prometheus family and its help.
    fn family(self) -> (&'static str, &'static str) {
        match self {
            ClientCounter::TlsHandshakeFailures => (
                "sluice_tls_handshake_failures_total",
                "Client TLS handshakes (over TCP or in QUIC) that failed or timed out.",
            ),
            ClientCounter::H2Streams => (
                "sluice_h2_streams_total",
                "HTTP/2 streams accepted from clients.",
            ),
            ClientCounter::H2ConnectionErrors => (
                "sluice_h2_connection_errors_total",
                "HTTP/2 client connections closed for a protocol error or flood (GOAWAY).",
            ),
            ClientCounter::H3Connections => (
                "sluice_h3_connections_total",
                "QUIC client connections whose HTTP/3 setup completed.",
            ),
            ClientCounter::H3Streams => (
                "sluice_h3_streams_total",
                "HTTP/3 request streams accepted from clients.",
            ),
            ClientCounter::H3DatagramsSteered => (
                "sluice_h3_datagrams_steered_total",
                "QUIC datagrams a worker received for a connection another worker serves (a client whose address changed), handed to that worker.",
            ),
        }
    }
}

/// Appends the families, summing each over `shards`.
pub(super) fn render<'a>(
    out: &mut Exposition,
    shards: impl Iterator<Item = &'a ClientCells> + Clone,
) {
    let gauge = |pick: fn(&ClientCells) -> &AtomicI64| -> i64 {
        shards.clone().map(|cells| pick(cells).load(Relaxed)).sum()
    };
    out.family(
        "sluice_open_connections",
        MetricKind::Gauge,
        "Client connections open.",
    )
    .sample(&[], gauge(|c| &c.open));
    out.family(
        "sluice_parked_connections",
        MetricKind::Gauge,
        "Client connections idle long enough to be parked (no task, no buffers).",
    )
    .sample(&[], gauge(|c| &c.parked));
    for counter in ClientCounter::ALL {
        let (name, help) = counter.family();
        let n: u64 = shards
            .clone()
            .map(|cells| counter.cell(cells).load(Relaxed))
            .sum();
        out.family(name, MetricKind::Counter, help).sample(&[], n);
    }
}
