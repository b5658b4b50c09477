//! Numbers as wrk prints them.

/// `765.52us`, `1.23ms`, `2.00s`, as wrk prints times.
pub fn format_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else if us < 60_000_000.0 {
        format!("{:.2}s", us / 1_000_000.0)
    } else {
        format!("{:.2}m", us / 60_000_000.0)
    }
}

/// `160.95k`, as wrk prints counts.
pub fn format_count(n: f64) -> String {
    if n < 1000.0 {
        format!("{n:.2}")
    } else if n < 1_000_000.0 {
        format!("{:.2}k", n / 1000.0)
    } else {
        format!("{:.2}M", n / 1_000_000.0)
    }
}

/// `19.29MB`, as wrk prints sizes (binary multiples).
pub fn format_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", UNITS[unit])
}

pub(crate) fn format_percentile(p: f64) -> String {
    let text = format!("{p}");
    format!("{text:>7}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_like_wrk() {
        assert_eq!(format_us(765.52), "765.52us");
        assert_eq!(format_us(1234.0), "1.23ms");
        assert_eq!(format_us(2_000_000.0), "2.00s");
        assert_eq!(format_count(160_950.0), "160.95k");
        assert_eq!(format_count(12.0), "12.00");
        assert_eq!(format_bytes(19.29 * 1024.0 * 1024.0), "19.29MB");
        assert_eq!(format_percentile(99.9), "   99.9%");
    }
}
