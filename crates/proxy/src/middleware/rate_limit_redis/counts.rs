//! What `/metrics` and `/stats.json` show of a limiter on Redis: whether
//! Redis answers, what it decided, and what `on_failure` decided for it.

use crate::{
    middleware::StatsSections,
    telemetry::{
        Exposition,
        MetricKind::{Counter, Gauge},
    },
};

/// One limiter's counts, read at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct StoreCounts {
    pub up: bool,
    /// Decisions Redis made: allowed, limited.
    pub allowed: u64,
    pub limited: u64,
    /// Calls that failed or ran past the budget.
    pub errors: u64,
    /// Requests that `on_failure` decided.
    pub fallbacks: u64,
}

impl StoreCounts {
    /// Its samples (`middleware`: the instance's name).
    pub(super) fn render(&self, name: &str, out: &mut Exposition) {
        out.family(
            "sluice_rate_limit_store_up",
            Gauge,
            "Whether the rate limit's Redis answers (1) or not (0).",
        )
        .sample(&[("middleware", name)], u8::from(self.up));
        out.family(
            "sluice_rate_limit_store_decisions_total",
            Counter,
            "Decisions Redis made, by result.",
        )
        .sample(&[("middleware", name), ("result", "allowed")], self.allowed)
        .sample(&[("middleware", name), ("result", "limited")], self.limited);
        out.family(
            "sluice_rate_limit_store_errors_total",
            Counter,
            "Calls to Redis that failed or ran past redis.timeout.",
        )
        .sample(&[("middleware", name)], self.errors);
        out.family(
            "sluice_rate_limit_store_fallbacks_total",
            Counter,
            "Requests decided by on_failure because Redis gave no decision.",
        )
        .sample(&[("middleware", name)], self.fallbacks);
    }

    /// Its `/stats.json` entry: `rate_limit_stores.NAME`.
    pub(super) fn stats(&self, name: &str, sections: &mut StatsSections) {
        let counts = serde_json::json!({
            "up": self.up,
            "allowed": self.allowed,
            "limited": self.limited,
            "errors": self.errors,
            "fallbacks": self.fallbacks,
        });
        sections
            .entry("rate_limit_stores")
            .or_default()
            .insert(name.to_string(), counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNTS: StoreCounts = StoreCounts {
        up: true,
        allowed: 5,
        limited: 2,
        errors: 1,
        fallbacks: 3,
    };

    #[test]
    fn two_limiters_share_each_family() {
        let mut out = Exposition::new();
        COUNTS.render("a", &mut out);
        StoreCounts::default().render("b", &mut out);
        let text = out.finish();
        assert_eq!(text.matches("# TYPE ").count(), 4, "{text}");
        for line in [
            "sluice_rate_limit_store_up{middleware=\"a\"} 1\nsluice_rate_limit_store_up{middleware=\"b\"} 0\n",
            "sluice_rate_limit_store_decisions_total{middleware=\"a\",result=\"allowed\"} 5\n\
             sluice_rate_limit_store_decisions_total{middleware=\"a\",result=\"limited\"} 2\n\
             sluice_rate_limit_store_decisions_total{middleware=\"b\",result=\"allowed\"} 0\n",
            "sluice_rate_limit_store_errors_total{middleware=\"a\"} 1\n",
            "sluice_rate_limit_store_fallbacks_total{middleware=\"a\"} 3\n",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
    }

    #[test]
    fn stats_name_each_limiter_under_rate_limit_stores() {
        let mut sections = StatsSections::new();
        COUNTS.stats("shared", &mut sections);
        assert_eq!(
            serde_json::Value::from(sections["rate_limit_stores"].clone()),
            serde_json::json!({"shared": {"up": true, "allowed": 5, "limited": 2, "errors": 1, "fallbacks": 3}})
        );
    }
}
