//! Readers of /proc/PID/status: the load generator's idle-memory probe
//! and the bench's per-process figures both read it, one way.

/// A `Name:   123 kB` line of a /proc/PID/status text, in KiB.
pub fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// VmRSS of process `pid`, in KiB (`None` if /proc cannot say).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_kib(&status, "VmRSS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_in_kib() {
        let status = "Name:\tsluice\nVmHWM:\t   10240 kB\nVmRSS:\t    9000 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(10240));
        assert_eq!(status_kib(status, "VmRSS"), Some(9000));
        assert_eq!(status_kib(status, "VmPeak"), None);
        assert_eq!(status_kib("VmRSSx: 5 kB", "VmRSS"), None);
    }

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }
}
