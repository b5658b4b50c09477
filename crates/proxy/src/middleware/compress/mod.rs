//! `compress`: response compression (gzip, Brotli, Zstandard), chosen
//! from the client's `Accept-Encoding` and the handler's order of
//! preference, streamed (each upstream read compressed and flushed as it
//! comes), within a memory budget shared by all connections
//! (docs/MIDDLEWARE.md). The request phase notes the coding the client
//! takes; the response's relay asks `body_filter::start` at its head,
//! which applies the rules of [`filter`] and compresses the body.

mod budget;
mod encoder;
mod filter;
mod negotiate;

use std::sync::{
    atomic::{AtomicU64, Ordering::Relaxed},
    Arc,
};

use http::Method;

pub(crate) use budget::gzip_bytes;
pub(crate) use filter::Offer;

use super::{
    build::{Build, Builder},
    Exchange, Flow, Handler, RequestView,
};
use crate::{
    config::{CompressSettings, Encoding},
    telemetry::{
        Exposition,
        MetricKind::{Counter, Gauge},
    },
};
use budget::Budget;
use encoder::Levels;

/// A `compress` handler instance.
#[derive(Debug)]
pub(crate) struct ResponseCompressor {
    policy: Arc<Policy>,
}

/// Its settings, compiled, with its budget and counts.
#[derive(Debug)]
pub(crate) struct Policy {
    algorithms: Vec<Encoding>,
    /// `(type, subtype)` in lower case; `None`: any subtype.
    types: Vec<(String, Option<String>)>,
    min_size: u64,
    event_stream: bool,
    levels: Levels,
    /// Each coding's reservation, by `Encoding as usize`.
    costs: [usize; 3],
    budget: Arc<Budget>,
    counters: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    /// Responses compressed, by `Encoding as usize`.
    compressed: [AtomicU64; 3],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Policy {
    pub(crate) fn new(settings: &CompressSettings) -> Self {
        let levels = Levels {
            gzip: settings.gzip,
            br: settings.br,
            zstd: settings.zstd,
        };
        let mut costs = [0; 3];
        for encoding in [Encoding::Gzip, Encoding::Br, Encoding::Zstd] {
            if settings.algorithms.contains(&encoding) {
                costs[encoding as usize] = budget::cost(encoding, &levels);
            }
        }
        Self {
            algorithms: settings.algorithms.clone(),
            types: settings
                .types
                .iter()
                .filter_map(|media| {
                    let (kind, sub) = media.split_once('/')?;
                    let sub = (sub != "*").then(|| sub.to_ascii_lowercase());
                    Some((kind.to_ascii_lowercase(), sub))
                })
                .collect(),
            min_size: settings.min_size,
            event_stream: settings.event_stream,
            levels,
            costs,
            budget: Budget::new(usize::try_from(settings.max_memory).unwrap_or(usize::MAX)),
            counters: Counters::default(),
        }
    }

    /// Whether a body of `content_type` is compressed: a listed type;
    /// never gRPC (its messages carry their own compression, and its
    /// clients do not expect a `Content-Encoding`); server-sent events
    /// only with `event_stream`.
    fn compresses(&self, content_type: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(content_type) else {
            return false;
        };
        let media = text
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let Some((kind, sub)) = media.split_once('/') else {
            return false;
        };
        if kind == "application"
            && (sub == "grpc" || sub.starts_with("grpc+") || sub.starts_with("grpc-"))
        {
            return false;
        }
        if media == "text/event-stream" && !self.event_stream {
            return false;
        }
        self.types
            .iter()
            .any(|(k, s)| k == kind && s.as_deref().is_none_or(|s| s == sub))
    }

    fn cost(&self, encoding: Encoding) -> usize {
        self.costs[encoding as usize]
    }
}

impl Build for CompressSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(ResponseCompressor {
            policy: Arc::new(Policy::new(self)),
        }))
    }
}

impl Handler for ResponseCompressor {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let accepted = request.fields.get_all("accept-encoding");
        let encoding = negotiate::choose(accepted, &self.policy.algorithms);
        exchange.body_filter = Some(Box::new(Offer {
            policy: Arc::clone(&self.policy),
            encoding,
            head: *request.method == Method::HEAD,
        }));
        Flow::Next
    }

    /// This instance's samples (`middleware`: its name).
    fn render_metrics(&self, name: &str, out: &mut Exposition) {
        let (counters, budget) = (&self.policy.counters, &self.policy.budget);
        let mut family = out.family(
            "sluice_compress_responses_total",
            Counter,
            "Responses compressed, by coding.",
        );
        for encoding in [Encoding::Gzip, Encoding::Br, Encoding::Zstd] {
            let labels = [("middleware", name), ("encoding", encoding.token())];
            family.sample(
                &labels,
                counters.compressed[encoding as usize].load(Relaxed),
            );
        }
        let mut family = out.family(
            "sluice_compress_bytes_total",
            Counter,
            "Body bytes through the compressors: in (as the upstream sent them) and out.",
        );
        family.sample(
            &[("middleware", name), ("direction", "in")],
            counters.bytes_in.load(Relaxed),
        );
        family.sample(
            &[("middleware", name), ("direction", "out")],
            counters.bytes_out.load(Relaxed),
        );
        let scalars = [
            (
                "sluice_compress_over_budget_total",
                Counter,
                "Responses sent uncompressed because the memory budget (max_memory) had no room.",
                budget.refused.load(Relaxed),
            ),
            (
                "sluice_compress_grown_total",
                Counter,
                "Compressors that held more than they were measured to; their reservation followed.",
                budget.grown.load(Relaxed),
            ),
            (
                "sluice_compress_memory_bytes",
                Gauge,
                "Memory reserved by the compressors at work.",
                budget.used() as u64,
            ),
            (
                "sluice_compress_memory_limit_bytes",
                Gauge,
                "The budget: max_memory.",
                budget.cap() as u64,
            ),
        ];
        for (metric, kind, help, value) in scalars {
            out.family(metric, kind, help)
                .sample(&[("middleware", name)], value);
        }
    }
}

#[cfg(test)]
mod tests;
