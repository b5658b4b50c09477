//! What a bench run measured: the model behind results.json, report.md,
//! report.html and the terminal tables. `docs/BENCH.md` documents it and
//! `docs/results.schema.json` is its JSON Schema; change all three together
//! and bump [`SCHEMA`] when a field changes meaning or goes away.

use serde::{Deserialize, Serialize};

/// The `schema` value of results.json.
pub const SCHEMA: &str = "sluice-bench/3";

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
    /// In the order they ran: baseline, proxy, middleware, protocols, lb,
    /// io, open, idle, then the runtimes groups (one per seed).
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
    /// `haproxy`, `nginx`, `envoy`, `traefik`, `caddy` or `nghttpx`.
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
    /// Times each row was measured; a row's figures are the rounds' median.
    pub rounds: usize,
    /// The seed backends the runtimes groups were asked for (`--runtimes`);
    /// empty when they did not run.
    #[serde(default)]
    pub runtimes: Vec<String>,
}

/// One named group of rows: the answer to one benchmark question (the
/// groups' table at the top of docs/BENCH.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Group {
    /// `baseline`, `proxy`, `middleware`, `protocols`, `lb`, `io`, `open`,
    /// `idle`, or one of the runtimes groups: `runtimes-hello` (seeds/001),
    /// `runtimes-petstore` (seeds/000 Q5), `runtimes-io` (seeds/003),
    /// `runtimes-open` (seeds/004).
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
    /// The system under test: `sluice`, a peer (`haproxy`, `nginx`,
    /// `envoy`, `traefik`, `caddy`, `nghttpx`), or `backend` when the
    /// backend is loaded directly.
    pub system: String,
    /// A sweep's point (the lb, io and open groups), else `None`.
    pub sweep: Option<SweepPoint>,
    /// `cold` (the first run after start, no warm-up) or `warm` (the next
    /// run); the open groups only.
    pub phase: Option<String>,
    /// The backend the row stands on, in the runtimes groups (alone or
    /// behind a proxy); `None` elsewhere.
    #[serde(default)]
    pub runtime: Option<RuntimeInfo>,
    /// Whole rounds run before the measured ones and discarded: 1 for a
    /// row on a JVM (its JIT warms up, as the seeds discarded their first
    /// run), 0 otherwise and for cold and warm rows.
    #[serde(default)]
    pub warmup_rounds: usize,
    pub load: LoadShape,
    /// The median of the rounds (errors: their sum; peak RSS: their
    /// maximum), so that one unlucky round moves nothing.
    #[serde(flatten)]
    pub figures: Figures,
    /// Each round's own figures, in round order (round `i` of every row
    /// of a group ran in the same pass over the systems).
    pub rounds: Vec<Figures>,
    /// Why the row cannot be compared with others, one reason each (its
    /// window was shorter than the latency it measured, it started before
    /// its target had worked off an earlier row's backlog); empty when it
    /// can. Verdicts leave such rows out and say so.
    #[serde(default)]
    pub not_comparable: Vec<String>,
    /// The `idle` group's memory figures (its rows run no load); `None`
    /// elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleMemory>,
}

/// What idle client connections cost a system: its RSS before they
/// opened (after one request) and with all of them open and idle.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct IdleMemory {
    pub rss_before_kib: u64,
    pub rss_idle_kib: u64,
    /// The rise divided by the connections.
    pub bytes_per_connection: f64,
}

/// A backend of the runtimes groups and what it runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    /// `spring-mvc`, `webflux`, `go-http`, `node`, `grizzly`, `payara`,
    /// `sluice serve`, or a peer (`nginx`, `haproxy`) answering the same bytes.
    pub name: String,
    /// What runs it: `OpenJDK 17.0.15`, `Go 1.26.8`, `Node.js 20.20.2`,
    /// `sluice 0.1.0`, `nginx 1.22.1`.
    pub version: String,
    /// The framework as its build resolved it: `Spring Boot 3.5.16, Spring
    /// MVC 6.2.19, Tomcat 10.1.55`.
    pub framework: String,
}

/// What one load run measured, or the median of several.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figures {
    /// Responses in the measured time: the requests answered.
    pub requests: u64,
    /// Requests sent in the measured time. With `carried_in` they are
    /// what the measured time saw: `carried_in + sent = requests + lost +
    /// unanswered`.
    #[serde(default)]
    pub sent: u64,
    /// Requests in flight when the measured time began (sent during the
    /// warm-up).
    #[serde(default)]
    pub carried_in: u64,
    /// Requests that ended without an answer (the errors count the
    /// failures by kind: a broken connection is one read error however
    /// many pipelined requests it took with it).
    #[serde(default)]
    pub lost: u64,
    /// Requests still waiting for their answer when the measured time
    /// ended: neither answered nor failed.
    #[serde(default)]
    pub unanswered: u64,
    /// Responses per connection over the measured time: how evenly the
    /// system served its connections (for a row, each figure's median
    /// over the rounds).
    #[serde(default)]
    pub per_connection: Option<load::Spread>,
    /// The measured time of this run, seconds (a row's rounds may differ
    /// when the bench lengthened a window to its latency).
    #[serde(default)]
    pub measured_s: f64,
    /// The wait before this run for its target to work off what earlier
    /// rows left it (the saturating groups); `None` where none was made.
    #[serde(default)]
    pub drain: Option<Drain>,
    pub requests_per_sec: f64,
    /// Response bytes read per second (headers included), like wrk's Transfer/sec.
    pub bytes_per_sec: f64,
    pub latency: Latency,
    pub errors: Errors,
    /// The system under test's process (the proxy; the backend when alone).
    pub process: Option<ProcessUsage>,
}

impl Figures {
    /// The figures of a row that measured memory, not load (the idle
    /// group): no requests, only the process's peak RSS.
    pub fn memory_only(name: String, peak_rss_kib: u64) -> Self {
        Figures {
            requests: 0,
            sent: 0,
            carried_in: 0,
            lost: 0,
            unanswered: 0,
            per_connection: None,
            measured_s: 0.0,
            drain: None,
            requests_per_sec: 0.0,
            bytes_per_sec: 0.0,
            latency: Latency::default(),
            errors: Errors::default(),
            process: Some(ProcessUsage {
                name,
                peak_rss_kib,
                cpu_s: 0.0,
                cpu_us_per_request: 0.0,
            }),
        }
    }

    /// The median of each figure over `rounds` (the mean of the middle
    /// two for an even count), the errors summed and the highest peak
    /// RSS; `None` for no rounds.
    pub fn combine(rounds: &[Figures]) -> Option<Figures> {
        if rounds.is_empty() {
            return None;
        }
        let f = |get: fn(&Figures) -> f64| median(rounds.iter().map(get));
        let u =
            |get: fn(&Figures) -> u64| median(rounds.iter().map(|r| get(r) as f64)).round() as u64;
        let mut errors = Errors::default();
        for r in rounds {
            errors.add(&r.errors);
        }
        let processes: Vec<&ProcessUsage> =
            rounds.iter().filter_map(|r| r.process.as_ref()).collect();
        let process = (!processes.is_empty()).then(|| {
            let p = |get: fn(&ProcessUsage) -> f64| median(processes.iter().map(|u| get(u)));
            ProcessUsage {
                name: processes[0].name.clone(),
                peak_rss_kib: processes.iter().map(|u| u.peak_rss_kib).max().unwrap_or(0),
                cpu_s: p(|u| u.cpu_s),
                cpu_us_per_request: p(|u| u.cpu_us_per_request),
            }
        });
        Some(Figures {
            requests: u(|r| r.requests),
            sent: u(|r| r.sent),
            carried_in: u(|r| r.carried_in),
            lost: u(|r| r.lost),
            unanswered: u(|r| r.unanswered),
            per_connection: spread_median(rounds),
            measured_s: f(|r| r.measured_s),
            drain: Drain::combine(rounds.iter().filter_map(|r| r.drain.as_ref())),
            requests_per_sec: f(|r| r.requests_per_sec),
            bytes_per_sec: f(|r| r.bytes_per_sec),
            latency: Latency {
                avg_us: f(|r| r.latency.avg_us),
                p50_us: u(|r| r.latency.p50_us),
                p90_us: u(|r| r.latency.p90_us),
                p95_us: u(|r| r.latency.p95_us),
                p99_us: u(|r| r.latency.p99_us),
                p999_us: u(|r| r.latency.p999_us),
                max_us: rounds.iter().map(|r| r.latency.max_us).max().unwrap_or(0),
            },
            errors,
            process,
        })
    }
}

impl Row {
    /// The lowest and highest value of a figure over the rounds.
    pub fn spread(&self, get: impl Fn(&Figures) -> f64) -> (f64, f64) {
        self.rounds
            .iter()
            .map(get)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    }
}

/// The median of `values`: the middle one, or the mean of the middle two.
/// Each figure of the rounds' per-connection spreads, its median.
fn spread_median(rounds: &[Figures]) -> Option<load::Spread> {
    let spreads: Vec<load::Spread> = rounds.iter().filter_map(|r| r.per_connection).collect();
    let u = |get: fn(&load::Spread) -> u64| {
        median(spreads.iter().map(|s| get(s) as f64)).round() as u64
    };
    (!spreads.is_empty()).then(|| load::Spread {
        connections: u(|s| s.connections),
        min: u(|s| s.min),
        median: u(|s| s.median),
        max: u(|s| s.max),
    })
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
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
    /// `HTTP/1.1`, `HTTP/2` or `HTTP/3`.
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

/// How the bench made sure a run did not inherit a backlog: before it,
/// the row's own request went to the row's target (a fresh connection
/// each time) until one was answered about as fast as the target answers
/// unloaded (the drain module says how), or the bound ran out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    /// How long the bench waited, seconds.
    pub waited_s: f64,
    /// Probes sent.
    pub probes: u64,
    /// The last probe's latency, µs.
    pub probe_us: u64,
    /// The target's unloaded latency: its fastest probe (the first ones
    /// ran before the group loaded anything), µs.
    pub unloaded_us: u64,
    /// Whether the last probe came back within the bound of the unloaded
    /// latency; false when the wait ran out first.
    pub drained: bool,
}

impl Drain {
    /// The rounds' drains as one: the longest wait, drained only if every
    /// round was.
    fn combine<'a>(drains: impl Iterator<Item = &'a Drain>) -> Option<Drain> {
        drains.copied().reduce(|a, b| {
            let mut longest = if b.waited_s > a.waited_s { b } else { a };
            longest.drained = a.drained && b.drained;
            longest
        })
    }
}

/// Failed requests by kind, and answers that were not 2xx or 3xx.
///
/// `sluice load` counts a non-2xx/3xx answer as a response, by status, and
/// keeps it out of its [`load::Errors`]; a bench row counts it as an error
/// of the system under test (a proxy answering 502 is not serving). In
/// results.json the fields sit side by side, as `load`'s are flattened.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Errors {
    #[serde(flatten)]
    pub failed: load::Errors,
    pub non_2xx_3xx: u64,
    /// 2xx/3xx answers other than the status a row expects (the oidc row's 200).
    #[serde(default)]
    pub unexpected_status: u64,
}

impl Errors {
    fn add(&mut self, other: &Errors) {
        self.failed.add(&other.failed);
        self.non_2xx_3xx += other.non_2xx_3xx;
        self.unexpected_status += other.unexpected_status;
    }

    pub fn total(&self) -> u64 {
        self.failed.total() + self.non_2xx_3xx + self.unexpected_status
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

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(rps: f64, p99_us: u64, rss: u64, read_errors: u64) -> Figures {
        Figures {
            requests: rps as u64,
            sent: rps as u64,
            carried_in: 0,
            lost: 0,
            unanswered: 0,
            per_connection: None,
            measured_s: 1.0,
            drain: None,
            requests_per_sec: rps,
            bytes_per_sec: rps * 100.0,
            latency: Latency {
                p99_us,
                max_us: p99_us * 2,
                ..Latency::default()
            },
            errors: Errors {
                failed: load::Errors {
                    read: read_errors,
                    ..load::Errors::default()
                },
                ..Errors::default()
            },
            process: Some(ProcessUsage {
                name: "sluice proxy".into(),
                peak_rss_kib: rss,
                cpu_s: rps / 1e5,
                cpu_us_per_request: 10.0,
            }),
        }
    }

    #[test]
    fn rounds_combine_into_medians_summed_errors_and_the_highest_peak() {
        let rounds = [
            figures(100.0, 900, 10, 1),
            figures(300.0, 700, 30, 0),
            figures(200.0, 800, 20, 2),
        ];
        let combined = Figures::combine(&rounds).expect("three rounds");
        assert_eq!(combined.requests_per_sec, 200.0);
        assert_eq!(combined.latency.p99_us, 800);
        assert_eq!(combined.latency.max_us, 1800);
        assert_eq!(combined.errors.failed.read, 3);
        let process = combined.process.expect("process");
        assert_eq!(process.peak_rss_kib, 30);
        assert!((process.cpu_s - 0.002).abs() < 1e-12);
        // Two rounds: the mean of the middle two.
        let even = Figures::combine(&rounds[..2]).expect("two rounds");
        assert_eq!(even.requests_per_sec, 200.0);
        assert!(Figures::combine(&[]).is_none());
    }
}
