//! Mirrored requests (`routes[].mirror`): `sluice_mirror_requests_total{result}`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{Exposition, MetricKind};

/// What became of a copy of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mirrored {
    /// Sent, and the mirror's upstream answered.
    Answered = 0,
    /// Sent, and no answer came (a failure, or its timeout).
    Failed,
    /// Not sent: the mirror's `max_in_flight` copies were out.
    Dropped,
    /// Not sent: the request's body was not whole in hand (it streams).
    Skipped,
}

impl Mirrored {
    pub(crate) const ALL: [Mirrored; 4] = [
        Mirrored::Answered,
        Mirrored::Failed,
        Mirrored::Dropped,
        Mirrored::Skipped,
    ];

    fn label(self) -> &'static str {
        match self {
            Mirrored::Answered => "answered",
            Mirrored::Failed => "failed",
            Mirrored::Dropped => "dropped",
            Mirrored::Skipped => "skipped",
        }
    }
}

/// One worker's counters.
pub(crate) type MirrorCells = [AtomicU64; Mirrored::ALL.len()];

/// Appends the family, summing each result over `shards`.
pub(crate) fn render<'a>(
    out: &mut Exposition,
    shards: impl Iterator<Item = &'a MirrorCells> + Clone,
) {
    let mut family = out.family(
        "sluice_mirror_requests_total",
        MetricKind::Counter,
        "Copies of requests for routes' mirrors, by result (dropped: max_in_flight were out; skipped: the body streamed).",
    );
    for result in Mirrored::ALL {
        let n: u64 = shards
            .clone()
            .map(|cells| cells[result as usize].load(Relaxed))
            .sum();
        family.sample(&[("result", result.label())], n);
    }
}
