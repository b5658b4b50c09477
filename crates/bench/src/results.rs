//! What a bench run measured: the model behind results.json, report.md,
//! report.html and the terminal tables. `docs/BENCH.md` documents it and
//! `docs/results.schema.json` is its JSON Schema; change all three together
//! and bump [`SCHEMA`] when a field changes meaning or goes away.

use serde::{Deserialize, Serialize};

/// The `schema` value of results.json.
pub const SCHEMA: &str = "sluice-bench/1";

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// When the run started, RFC 3339 in UTC.
    pub started: String,
    /// Wall-clock length of the whole run, in seconds.
    pub elapsed_s: f64,
    pub machine: Machine,
    pub settings: Settings,
    /// What the run could not do or changed (a peer missing, a sweep scaled down).
    pub notes: Vec<String>,
    /// In the order they ran: baseline, proxy, middleware, protocols, lb, io, open.
    pub groups: Vec<Group>,
}

/// Facts that make results comparable between machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// PRETTY_NAME of /etc/os-release.
    pub os: String,
    pub memory_kib: u64,
    /// The open-file limit the run had (after raising it to the hard limit).
    pub open_file_limit: u64,
    pub sluice_version: String,
    /// Peers found on PATH and their versions; a missing one is absent.
    pub peers: Vec<PeerVersion>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerVersion {
    /// `nginx` or `haproxy`.
    pub name: String,
    pub version: String,
    pub path: String,
}

/// How the run was asked to go.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Groups run, by name.
    pub only: Vec<String>,
    /// Measured time of each throughput row, in seconds.
    pub duration_s: f64,
    /// The warm-up round before each row, discarded, in seconds.
    pub warmup_s: f64,
    /// Connections of the throughput rows (the sweeps set their own).
    pub connections: usize,
    /// HTTP/1.1 requests in flight per connection.
    pub pipeline: usize,
    /// Load generator and system under test on separate CPUs.
    pub pin: bool,
    pub quick: bool,
    /// The lb sweep's top, after scaling to the machine's limits.
    pub max_conns: usize,
}

/// One named group of rows: one of DESIGN.md's questions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Group {
    /// `baseline`, `proxy`, `middleware`, `protocols`, `lb`, `io` or `open`.
    pub name: String,
    /// A heading: "Backend alone", "Load balancing over 5 backends", ...
    pub title: String,
    /// The question the group answers, one sentence.
    pub question: String,
    pub rows: Vec<Row>,
    /// Rows that could not run here and why ("nginx: not on PATH").
    pub notes: Vec<String>,
}

/// One measured load run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// What was measured, unique within the group: "sluice -> petstore",
    /// "jwt", "haproxy TLS listener", ...
    pub label: String,
    /// The system under test: `sluice`, `nginx`, `haproxy`, or `backend`
    /// when the backend is loaded directly.
    pub system: String,
    /// A sweep's point (the lb, io and open groups), else `None`.
    pub sweep: Option<SweepPoint>,
    /// `cold` (the first run after start, no warm-up) or `warm`; open group only.
    pub phase: Option<String>,
    pub load: LoadShape,
    /// Responses in the measured time.
    pub requests: u64,
    pub requests_per_sec: f64,
    /// Response bytes read per second (headers included), like wrk's Transfer/sec.
    pub bytes_per_sec: f64,
    pub latency: Latency,
    pub errors: Errors,
    /// The system under test's process (the proxy; the backend when alone).
    pub process: Option<ProcessUsage>,
}

/// A sweep's variable and its value at this row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepPoint {
    /// `connections` (lb), `users` (io) or `rate` (open, requests/s).
    pub name: String,
    pub value: f64,
}

/// The load that produced a row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadShape {
    /// `GET http://127.0.0.1:PORT/v1/pets`.
    pub request: String,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: String,
    /// Connections, or users in the users model.
    pub connections: usize,
    pub pipeline: usize,
    /// Open model: the arrival rate asked for, requests/s.
    pub rate: Option<f64>,
    /// Users model: each user's pause between a response and its next request, ms.
    pub think_ms: Option<[u64; 2]>,
    pub duration_s: f64,
    pub warmup_s: f64,
}

/// Latency in microseconds. In the open model it counts from each
/// request's intended send time (coordinated-omission corrected).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Latency {
    pub avg_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// Failed requests by kind, and answers that were not 2xx or 3xx.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub parse: u64,
    pub non_2xx_3xx: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse + self.non_2xx_3xx
    }
}

/// What the system under test's process used, from /proc.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessUsage {
    /// `sluice proxy`, `nginx`, `haproxy`, `sluice serve petstore`.
    pub name: String,
    /// VmHWM at the end of the row: the peak since the process started
    /// (a process that serves several rows carries its peak forward).
    pub peak_rss_kib: u64,
    /// User + system CPU time during the measured time, in seconds.
    pub cpu_s: f64,
    /// `cpu_s` per response, in microseconds.
    pub cpu_us_per_request: f64,
}
