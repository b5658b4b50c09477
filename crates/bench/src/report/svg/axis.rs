//! Axes: round tick values, their labels, and the value -> pixel mapping.

/// Round tick values covering [0, max]: steps of 1, 2 or 5 times a power of 10.
pub(crate) fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let rough = max / target.max(1) as f64;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// Powers of ten from below `min` to above `max` (both > 0), with 2 and 5
/// between them when the range spans 3 decades or less.
pub(crate) fn log_ticks(min: f64, max: f64) -> Vec<f64> {
    let lo = min.max(f64::MIN_POSITIVE).log10().floor() as i32;
    let mut hi = max.max(f64::MIN_POSITIVE).log10().ceil() as i32;
    if hi <= lo {
        hi = lo + 1;
    }
    let mut ticks = Vec::new();
    for e in lo..=hi {
        let decade = 10f64.powi(e);
        ticks.push(decade);
        if hi - lo <= 3 && e < hi {
            ticks.push(2.0 * decade);
            ticks.push(5.0 * decade);
        }
    }
    ticks
}

/// A tick's text: `0`, `0.5`, `250`, `1.5k`, `12k`, `2M`.
pub(crate) fn tick_label(v: f64) -> String {
    fn trim(s: String) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e3 {
        format!("{}k", trim(format!("{:.2}", v / 1e3)))
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

/// A value -> pixel mapping.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    pub(super) d0: f64,
    pub(super) d1: f64,
    pub(super) r0: f64,
    pub(super) r1: f64,
    pub(super) log: bool,
}

impl Scale {
    /// From 0 at `r0` to the last of `ticks` (from [`nice_ticks`]) at `r1`.
    pub(super) fn linear(ticks: &[f64], r0: f64, r1: f64) -> Self {
        Scale {
            d0: 0.0,
            d1: ticks.last().copied().unwrap_or(1.0),
            r0,
            r1,
            log: false,
        }
    }

    pub(super) fn map(&self, v: f64) -> f64 {
        let (v, d0, d1) = if self.log {
            (v.max(self.d0).log10(), self.d0.log10(), self.d1.log10())
        } else {
            (v, self.d0, self.d1)
        };
        if d1 == d0 {
            return self.r0;
        }
        let t = ((v - d0) / (d1 - d0)).clamp(0.0, 1.0);
        self.r0 + t * (self.r1 - self.r0)
    }
}
