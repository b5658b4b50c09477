//! The interval log of a run (`--log`): HdrHistogram's standard interval
//! log, each histogram V2+DEFLATE and base64 as Java's `HistogramLogWriter`
//! writes them, so `HistogramLogProcessor` and the other HdrHistogram
//! readers read it. One interval per second of measuring: the latency
//! untagged (µs, corrected in the open model), `Tag=uncorrected` (µs) and
//! `Tag=lateness` (the send lateness, ns) in the open model. The counts
//! HdrHistogram has no place for are comment lines, which other readers
//! skip: `#sluice-test {json}` after the header, the test this run is a
//! part of (`identity.rs`), `#sluice-window {json}` before each
//! interval's histograms and `#sluice-run {json}` at the end, the whole
//! run's settings and counts.

use std::{
    collections::BTreeMap,
    io::{self, Write},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use base64::Engine as _;
use hdrhistogram::{
    serialization::{interval_log, Deserializer, V2DeflateSerializer},
    Histogram,
};
use serde::{Deserialize, Serialize};

use crate::{
    figures::{self, CheckCount, Errors, Figures, PHASES},
    identity::TestIdentity,
    measured::Measured,
    report::ReportConfig,
    shard::unix_seconds,
};

/// Bumped when a log's meaning changes; `merge` refuses newer ones.
/// Version 2 added the `#sluice-test` line; version 3 each interval's
/// statuses and checks, the phase histograms (`Tag=waiting`, ...) and
/// the stages' counts in the summary. Logs of versions 1 to 3 all merge.
pub(crate) const LOG_VERSION: u32 = 3;
/// The length of an interval.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);
const HEADER: &str = "#[Logged with sluice load ";
const TEST: &str = "#sluice-test ";
const WINDOW: &str = "#sluice-window ";
const RUN: &str = "#sluice-run ";
const UNCORRECTED: &str = "uncorrected";
const LATENESS: &str = "lateness";

/// The counts of one interval, beside its histograms.
#[derive(Debug, Serialize, Deserialize)]
struct WindowCounts {
    index: u64,
    errors: Errors,
    bytes_read: u64,
    /// Version 3: responses by status, and each check's counts.
    #[serde(default)]
    status: BTreeMap<u16, u64>,
    #[serde(default)]
    checks: Vec<CheckCount>,
}

/// The whole run's settings and the counts that are not in the histograms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LogSummary {
    pub(crate) log_version: u32,
    pub(crate) tool: String,
    /// When measuring started (after the warm-up), in unix seconds: the log's BaseTime.
    pub(crate) start_unix_s: f64,
    pub(crate) config: ReportConfig,
    pub(crate) elapsed_s: f64,
    /// Responses: the intervals' latency counts add up to it.
    pub(crate) requests: u64,
    pub(crate) status: BTreeMap<u16, u64>,
    pub(crate) per_second: Vec<u64>,
    pub(crate) thread_samples: Vec<u64>,
    pub(crate) max_lag_ms: f64,
    pub(crate) unsent: u64,
    pub(crate) interrupted: bool,
    /// Version 3, with stages: responses (by when done) and sends (by
    /// when due) in each.
    #[serde(default)]
    pub(crate) stage_responses: Vec<u64>,
    #[serde(default)]
    pub(crate) stage_sent: Vec<u64>,
}

/// Writes a run's log as its intervals complete.
pub(crate) struct LogWriter {
    out: Box<dyn Write + Send>,
    path: PathBuf,
    serializer: V2DeflateSerializer,
}

impl LogWriter {
    /// Creates `path` (`-`: stdout) and writes the header and the test's
    /// identity; `start` is when measuring starts.
    pub(crate) fn create(
        path: &Path,
        start: SystemTime,
        identity: &TestIdentity,
    ) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(io::stdout())
        } else {
            // A folder per run (deploy/kubernetes/load-job.yaml) is made here.
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            Box::new(io::BufWriter::new(std::fs::File::create(path)?))
        };
        let mut log = Self {
            out,
            path: path.to_path_buf(),
            serializer: V2DeflateSerializer::new(),
        };
        let at = unix_seconds(start);
        let human = humantime::format_rfc3339_millis(start);
        write!(
            log.out,
            "{HEADER}{} (log version {LOG_VERSION})]\n\
             #[Histogram log format version 1.3]\n\
             #[StartTime: {at:.3} (seconds since epoch), {human}]\n\
             #[BaseTime: {at:.3} (seconds since epoch)]\n\
             #[Latency in microseconds, corrected from the intended send time in the open model; \
             Tag=uncorrected: from the actual send (us); Tag=lateness: send lateness (ns); \
             Tag=waiting, receiving, connect, tls, dns: phases (us)]\n\
             \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
            env!("CARGO_PKG_VERSION")
        )?;
        let json = serde_json::to_string(identity).map_err(io::Error::other)?;
        writeln!(log.out, "{TEST}{json}")?;
        log.out.flush()?;
        Ok(log)
    }

    /// Writes the summary after the last interval.
    pub(crate) fn finish(mut self, summary: &LogSummary) -> io::Result<()> {
        let json = serde_json::to_string(summary).map_err(io::Error::other)?;
        writeln!(self.out, "{RUN}{json}")?;
        self.out.flush()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes interval `index`, `duration` long, whose figures are `figures`.
    pub(crate) fn write_window(
        &mut self,
        index: u64,
        duration: Duration,
        figures: &Figures,
    ) -> io::Result<()> {
        let counts = WindowCounts {
            index,
            errors: figures.errors,
            bytes_read: figures.bytes_read,
            status: figures.statuses().collect(),
            checks: figures.checks.clone(),
        };
        let json = serde_json::to_string(&counts).map_err(io::Error::other)?;
        writeln!(self.out, "{WINDOW}{json}")?;
        let start = INTERVAL * index as u32;
        let mut writer = interval_log::IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)?;
        let mut histograms = vec![
            (None, Some(&figures.latency)),
            (Some(UNCORRECTED), figures.uncorrected.as_ref()),
            (Some(LATENESS), figures.lateness.as_ref()),
        ];
        // Phases only when they hold something: most intervals open no connection.
        for (name, phase) in PHASES.iter().zip(figures.phases.each()) {
            histograms.push((Some(*name), (!phase.is_empty()).then_some(phase)));
        }
        for (tag, histogram) in histograms {
            let Some(histogram) = histogram else { continue };
            let tag = tag.and_then(interval_log::Tag::new);
            writer
                .write_histogram(histogram, start, duration, tag)
                .map_err(|err| io::Error::other(err.to_string()))?;
        }
        drop(writer);
        self.out.flush()
    }
}

/// One interval read back from a log.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) index: u64,
    pub(crate) start: Duration,
    pub(crate) duration: Duration,
    pub(crate) figures: Figures,
}

/// A log read back: its test, intervals and summary.
#[derive(Debug)]
pub(crate) struct LoadLog {
    /// `None` in a log of version 1.
    pub(crate) identity: Option<TestIdentity>,
    pub(crate) windows: Vec<Window>,
    pub(crate) summary: LogSummary,
}

/// Reads a log `sluice load --log` wrote; errors name the line.
pub(crate) fn read_log(text: &str) -> Result<LoadLog, String> {
    let mut windows: Vec<Window> = Vec::new();
    let mut summary: Option<LogSummary> = None;
    let mut identity: Option<TestIdentity> = None;
    // `kubectl logs` of a `--log -` run interleaves stderr: whatever comes
    // before the header (a warning) or after the summary (the report) is not the log's.
    let start = text.find(HEADER).unwrap_or(0);
    for (number, line) in text[start..].lines().enumerate() {
        let at = |why: String| format!("line {}: {why}", number + 1);
        if summary.is_some() {
            break;
        }
        if let Some(json) = line.strip_prefix(TEST) {
            let read = serde_json::from_str(json)
                .map_err(|err| at(format!("bad test identity: {err}")))?;
            identity = Some(read);
        } else if let Some(json) = line.strip_prefix(WINDOW) {
            let counts: WindowCounts = serde_json::from_str(json)
                .map_err(|err| at(format!("bad interval counts: {err}")))?;
            let mut figures = Figures::new(false, counts.checks.len());
            figures.bytes_read = counts.bytes_read;
            figures.errors = counts.errors;
            figures.checks = counts.checks;
            for (code, n) in counts.status {
                figures.status[figures::status_slot(code)] += n;
            }
            windows.push(Window {
                index: counts.index,
                start: Duration::ZERO,
                duration: Duration::ZERO,
                figures,
            });
        } else if let Some(json) = line.strip_prefix(RUN) {
            let read: LogSummary =
                serde_json::from_str(json).map_err(|err| at(format!("bad run summary: {err}")))?;
            if read.log_version > LOG_VERSION {
                return Err(at(format!(
                    "log version {} is newer than this sluice reads ({LOG_VERSION})",
                    read.log_version
                )));
            }
            summary = Some(read);
        } else if !(line.is_empty() || line.starts_with('#') || line.starts_with('"')) {
            let window = windows.last_mut().ok_or_else(|| {
                at("a histogram before any #sluice-window line: not a sluice load log".into())
            })?;
            read_histogram(line, window).map_err(at)?;
        }
    }
    let summary = summary
        .ok_or("no #sluice-run summary at the end: the run did not finish (was it killed?)")?;
    if identity.is_none() && summary.log_version >= 2 {
        return Err(format!(
            "no #sluice-test line: a log of version {} names its test",
            summary.log_version
        ));
    }
    Ok(LoadLog {
        identity,
        windows,
        summary,
    })
}

/// Adds one histogram line to `window`.
fn read_histogram(line: &str, window: &mut Window) -> Result<(), String> {
    let with_newline = format!("{line}\n");
    let entry = interval_log::IntervalLogIterator::new(with_newline.as_bytes()).next();
    let Some(Ok(interval_log::LogEntry::Interval(interval))) = entry else {
        return Err("not an interval histogram line".into());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(interval.encoded_histogram())
        .map_err(|err| format!("bad base64: {err}"))?;
    let histogram: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|err| format!("bad histogram: {err:?}"))?;
    let figures = &mut window.figures;
    let phase = |name: &str| PHASES.iter().position(|p| *p == name);
    let slot = match interval.tag().as_deref() {
        None => &mut figures.latency,
        Some(UNCORRECTED) => figures.uncorrected.get_or_insert_with(figures::histogram),
        Some(LATENESS) => figures
            .lateness
            .get_or_insert_with(figures::nanosecond_histogram),
        Some(other) => match phase(other) {
            Some(index) => figures
                .phases
                .each_mut()
                .into_iter()
                .nth(index)
                .ok_or("no phase")?,
            None => return Err(format!("unknown histogram tag `{other}`")),
        },
    };
    // Into sluice's own bounds, so that every interval adds to every other.
    slot.add(&histogram)
        .map_err(|err| format!("histogram out of sluice's range: {err:?}"))?;
    window.start = interval.start_timestamp();
    window.duration = interval.duration();
    Ok(())
}

impl Measured {
    /// The run's summary line: `config` as applied, measuring from `start`.
    pub(crate) fn log_summary(&self, config: &ReportConfig, start: SystemTime) -> LogSummary {
        LogSummary {
            log_version: LOG_VERSION,
            tool: format!("sluice load {}", env!("CARGO_PKG_VERSION")),
            start_unix_s: unix_seconds(start),
            config: config.clone(),
            elapsed_s: self.elapsed.as_secs_f64(),
            requests: self.figures.latency.len(),
            status: self.status.clone(),
            per_second: self.per_second.clone(),
            thread_samples: self.thread_samples.clone(),
            max_lag_ms: self.max_lag.as_secs_f64() * 1000.0,
            unsent: self.unsent,
            interrupted: self.interrupted,
            stage_responses: self
                .stages
                .as_ref()
                .map_or_else(Vec::new, |s| s.responses.clone()),
            stage_sent: self
                .stages
                .as_ref()
                .map_or_else(Vec::new, |s| s.sent.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_reads_back_with_stderr_around_it_and_refuses_a_cut_one() {
        let path =
            std::env::temp_dir().join(format!("sluice-log-unit-{}.hlog", std::process::id()));
        let start = SystemTime::now();
        let url = [(http::Method::GET, "http://127.0.0.1:1/".to_string())];
        let load = crate::LoadConfig::new(&url).expect("valid");
        let identity = TestIdentity::new(&load);
        let mut writer = LogWriter::create(&path, start, &identity).expect("create");
        let mut figures = Figures::new(true, 2);
        figures.latency.record(250).expect("in range");
        figures
            .uncorrected
            .as_mut()
            .unwrap()
            .record(200)
            .expect("in range");
        figures
            .lateness
            .as_mut()
            .unwrap()
            .record(5_000)
            .expect("in range");
        figures.errors.timeout = 2;
        figures.bytes_read = 100;
        figures.status[200] = 1;
        figures.checks[1] = CheckCount {
            passed: 1,
            failed: 3,
        };
        figures.phases.waiting.record(180).expect("in range");
        figures.phases.connect.record(40).expect("in range");
        writer.write_window(0, INTERVAL, &figures).expect("write");
        let config = ReportConfig::new(&load);
        let measured = Measured {
            figures,
            status: [(200, 1)].into(),
            per_second: vec![1],
            per_connection: Vec::new(),
            thread_samples: vec![1],
            max_lag: Duration::ZERO,
            unsent: 0,
            accounting: None,
            elapsed: Duration::from_secs(1),
            interrupted: false,
            intervals: Vec::new(),
            stages: None,
        };
        writer
            .finish(&measured.log_summary(&config, start))
            .expect("finish");
        let log = std::fs::read_to_string(&path).expect("read");
        std::fs::remove_file(&path).ok();

        // As `kubectl logs` shows a `--log -` run: a warning before, the report after.
        let noisy = format!("WARN late\n{log}Running 1 requests test @ GET http://127.0.0.1:1/\n");
        let read = read_log(&noisy).expect("a log");
        assert_eq!(read.windows.len(), 1);
        let window = &read.windows[0].figures;
        assert_eq!(window.latency.len(), 1);
        assert_eq!(window.uncorrected.as_ref().map(Histogram::len), Some(1));
        assert_eq!(window.lateness.as_ref().map(Histogram::len), Some(1));
        assert_eq!((window.errors.timeout, window.bytes_read), (2, 100));
        // Version 3: the phases, statuses and checks come back.
        assert_eq!(window.phases.waiting.len(), 1);
        assert_eq!(window.phases.connect.len(), 1);
        assert!(window.phases.tls.is_empty());
        assert_eq!(window.status[200], 1);
        assert_eq!(window.checks[1].failed, 3);
        assert_eq!(read.windows[0].duration, INTERVAL);
        assert_eq!(read.summary.requests, 1);
        assert_eq!(read.summary.config, config);
        assert_eq!(read.identity, Some(identity));

        let cut: String = log
            .lines()
            .filter(|l| !l.starts_with(RUN))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = read_log(&cut).expect_err("no summary");
        assert!(err.contains("did not finish"), "{err}");
        let unnamed: String = log
            .lines()
            .filter(|l| !l.starts_with(TEST))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = read_log(&unnamed).expect_err("no identity");
        assert!(err.contains("no #sluice-test line"), "{err}");
        let err = read_log("1.0,1.0,5.0,HISTFAAAAA\n").expect_err("not ours");
        assert!(err.contains("not a sluice load log"), "{err}");
    }
}
