//! What `/metrics` shows of an `ext_authz` handler: its decisions, by
//! result.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::telemetry::{Exposition, MetricKind};

/// One instance's decisions.
#[derive(Debug, Default)]
pub(super) struct AuthzCounts {
    pub allowed: AtomicU64,
    pub denied: AtomicU64,
    /// No decision: `on_failure` decided.
    pub fallbacks: AtomicU64,
    /// An allow answer remembered.
    pub cache_hits: AtomicU64,
}

impl AuthzCounts {
    /// Its samples (`middleware`: the instance's name).
    pub(super) fn render(&self, name: &str, out: &mut Exposition) {
        let mut family = out.family(
            "sluice_ext_authz_decisions_total",
            MetricKind::Counter,
            "Requests an ext_authz handler decided, by result (cached: an allow answer remembered; failed: no decision, on_failure decided).",
        );
        for (result, count) in [
            ("allowed", &self.allowed),
            ("denied", &self.denied),
            ("cached", &self.cache_hits),
            ("failed", &self.fallbacks),
        ] {
            family.sample(
                &[("middleware", name), ("result", result)],
                count.load(Relaxed),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_result_is_its_own_counter_and_instances_share_the_family() {
        let counts = AuthzCounts::default();
        counts.allowed.fetch_add(3, Relaxed);
        counts.denied.fetch_add(2, Relaxed);
        counts.cache_hits.fetch_add(1, Relaxed);
        let mut out = Exposition::new();
        counts.render("authz", &mut out);
        AuthzCounts::default().render("other", &mut out);
        let text = out.finish();
        assert_eq!(text.matches("# TYPE ").count(), 1, "{text}");
        for line in [
            "sluice_ext_authz_decisions_total{middleware=\"authz\",result=\"allowed\"} 3\n",
            "sluice_ext_authz_decisions_total{middleware=\"authz\",result=\"denied\"} 2\n",
            "sluice_ext_authz_decisions_total{middleware=\"authz\",result=\"cached\"} 1\n",
            "sluice_ext_authz_decisions_total{middleware=\"authz\",result=\"failed\"} 0\n",
            "sluice_ext_authz_decisions_total{middleware=\"other\",result=\"failed\"} 0\n",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
    }
}
