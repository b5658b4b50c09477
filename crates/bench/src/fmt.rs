//! Numbers in human units, the same in every output.

use crate::results::{Errors, LoadShape, Row, SweepPoint};

/// `2422353.4` -> `2,422,353`.
pub(crate) fn count(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_owned();
    }
    let rounded = value.round();
    let negative = rounded < 0.0;
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if negative {
        out.insert(0, '-');
    }
    out
}

/// Microseconds in the unit that keeps 3 significant digits:
/// `850µs`, `1.23ms`, `34.5ms`, `305ms`, `1.20s`.
pub(crate) fn micros(us: f64) -> String {
    if !us.is_finite() {
        return "-".to_owned();
    }
    if us < 1_000.0 {
        if us < 10.0 && us > 0.0 {
            format!("{us:.1}µs")
        } else {
            format!("{us:.0}µs")
        }
    } else if us < 1_000_000.0 {
        let ms = us / 1_000.0;
        format!("{}ms", three_digits(ms))
    } else {
        format!("{}s", three_digits(us / 1_000_000.0))
    }
}

/// `1.23`, `34.5`, `305`.
fn three_digits(value: f64) -> String {
    if value < 9.995 {
        format!("{value:.2}")
    } else if value < 99.95 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// Milliseconds with 3 significant digits, no unit (pivot tables).
pub(crate) fn millis(us: f64) -> String {
    if !us.is_finite() {
        return "-".to_owned();
    }
    let ms = us / 1_000.0;
    if ms < 1.0 {
        format!("{ms:.3}")
    } else {
        three_digits(ms)
    }
}

/// Bytes per second in binary units, like wrk's Transfer/sec: `19.77MiB`.
pub(crate) fn bytes(per_sec: f64) -> String {
    if !per_sec.is_finite() {
        return "-".to_owned();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = per_sec;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0}B")
    } else {
        format!("{value:.2}{}", UNITS[unit])
    }
}

/// KiB as MiB with one decimal.
/// "4.1": half the range between `lo` and `hi`, in percent of `mid`.
pub(crate) fn plus_minus(lo: f64, hi: f64, mid: f64) -> String {
    if mid <= 0.0 || !lo.is_finite() || !hi.is_finite() {
        return "-".into();
    }
    format!("{:.1}", (hi - lo) / 2.0 / mid * 100.0)
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// A ratio: `1.12x`.
pub(crate) fn times(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() => {
            if r >= 100.0 {
                format!("{r:.0}x")
            } else {
                format!("{r:.2}x")
            }
        }
        _ => "-".to_owned(),
    }
}

/// `a / b` when both are finite and `b` is not zero.
pub(crate) fn ratio(a: f64, b: f64) -> Option<f64> {
    if a.is_finite() && b.is_finite() && b != 0.0 {
        Some(a / b)
    } else {
        None
    }
}

/// A sweep value: whole numbers with separators, else 2 decimals.
pub(crate) fn value(v: f64) -> String {
    if v.fract() == 0.0 {
        count(v)
    } else {
        format!("{v:.2}")
    }
}

/// A sweep point as a short phrase: `connections 500`, `users 300`,
/// `rate 2,000/s`.
pub(crate) fn sweep(point: &SweepPoint) -> String {
    if point.name == "rate" {
        format!("rate {}/s", value(point.value))
    } else {
        format!("{} {}", point.name, value(point.value))
    }
}

/// A row's sweep point and phase, or empty: `rate 2,000/s cold`.
pub(crate) fn point(row: &Row) -> String {
    let mut out = row.sweep.as_ref().map(sweep).unwrap_or_default();
    if let Some(phase) = &row.phase {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(phase);
    }
    out
}

/// The error total, with its kinds when there are any: `12 (read 10, http 2)`.
/// `http` counts answers that were not 2xx or 3xx.
pub(crate) fn errors(errors: &Errors) -> String {
    let total = errors.total();
    if total == 0 {
        return "0".to_owned();
    }
    let kinds = error_kinds(errors);
    format!("{} ({kinds})", count(total as f64))
}

/// Only the non-zero kinds: `read 10, http 2`; empty when there are none.
pub(crate) fn error_kinds(errors: &Errors) -> String {
    let kinds = [
        ("connect", errors.failed.connect),
        ("read", errors.failed.read),
        ("write", errors.failed.write),
        ("timeout", errors.failed.timeout),
        ("parse", errors.failed.parse),
        ("http", errors.non_2xx_3xx),
        ("unexpected status", errors.unexpected_status),
    ];
    kinds
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {}", count(*n as f64)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The request without scheme and address: `GET /v1/pets`.
pub(crate) fn request(request: &str) -> String {
    let mut parts = request.splitn(2, ' ');
    let method = parts.next().unwrap_or_default();
    let Some(target) = parts.next() else {
        return request.to_owned();
    };
    let path = ["http://", "https://"]
        .iter()
        .find_map(|scheme| target.strip_prefix(scheme))
        .map(|rest| match rest.find('/') {
            Some(slash) => &rest[slash..],
            None => "/",
        })
        .unwrap_or(target);
    format!("{method} {path}")
}

/// The load shape on one line: `HTTP/1.1 GET /v1/pets c128 p1 10s+2s`,
/// with `rate 2,000/s` and `think 100-500ms` when set.
pub(crate) fn load(load: &LoadShape) -> String {
    let mut out = format!(
        "{} {} c{}",
        load.protocol,
        request(&load.request),
        count(load.connections as f64)
    );
    if load.pipeline > 1 {
        out.push_str(&format!(" p{}", load.pipeline));
    }
    if let Some(rate) = load.rate {
        out.push_str(&format!(" rate {}/s", value(rate)));
    }
    if let Some([lo, hi]) = load.think_ms {
        if lo == hi {
            out.push_str(&format!(" think {lo}ms"));
        } else {
            out.push_str(&format!(" think {lo}-{hi}ms"));
        }
    }
    out.push_str(&format!(" {}s", value(load.duration_s)));
    if load.warmup_s > 0.0 {
        out.push_str(&format!("+{}s", value(load.warmup_s)));
    }
    out
}

/// Seconds as `12m 3s`, `45.2s`.
pub(crate) fn elapsed(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "-".to_owned();
    }
    if seconds < 60.0 {
        return format!("{seconds:.1}s");
    }
    let whole = seconds.round() as u64;
    let (h, m, s) = (whole / 3600, (whole % 3600) / 60, whole % 60);
    if h > 0 {
        format!("{h}h {m}m {s}s")
    } else {
        format!("{m}m {s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(count(2_422_353.4), "2,422,353");
        assert_eq!(count(999.0), "999");
        assert_eq!(count(1000.0), "1,000");
        assert_eq!(micros(850.0), "850µs");
        assert_eq!(micros(1630.0), "1.63ms");
        assert_eq!(micros(34_450.0), "34.5ms");
        assert_eq!(micros(305_000.0), "305ms");
        assert_eq!(micros(1_200_000.0), "1.20s");
        assert_eq!(bytes(19.77 * 1024.0 * 1024.0), "19.77MiB");
        assert_eq!(bytes(512.0), "512B");
        assert_eq!(times(Some(1.123)), "1.12x");
        assert_eq!(times(None), "-");
        assert_eq!(request("GET http://127.0.0.1:8080/v1/pets"), "GET /v1/pets");
        assert_eq!(request("GET http://127.0.0.1:8080"), "GET /");
        assert_eq!(elapsed(723.0), "12m 3s");
        let e = Errors {
            failed: load::Errors {
                read: 10,
                ..load::Errors::default()
            },
            non_2xx_3xx: 2,
            unexpected_status: 0,
        };
        assert_eq!(errors(&e), "12 (read 10, http 2)");
        let redirected = Errors {
            unexpected_status: 3,
            ..e
        };
        assert_eq!(
            errors(&redirected),
            "15 (read 10, http 2, unexpected status 3)"
        );
    }
}
