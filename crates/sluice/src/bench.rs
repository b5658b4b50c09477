//! `sluice bench`: the benchmark matrix's command line and terminal.

use std::{
    io::IsTerminal,
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use bench::{
    results::{Figures, Group},
    runtimes::{BuildEvent, Runtime},
    BenchOptions, GroupName, Observer, PeerKind, Round,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{parse_duration, parse_think, watch_interrupts};

/// Run the whole benchmark on loopback: the backend alone, behind sluice,
/// each middleware handler, HTTP/1.1 vs HTTP/2 vs TLS, load balancing
/// across a concurrency sweep, IO-heavy users with think time, an open
/// arrival rate cold and warm; every row again with each peer that is
/// installed (HAProxy, nginx, Envoy, Traefik, Caddy, nghttpx); on request (`--only runtimes`) each seed's
/// table against the seeds' own backends (Spring, Go, Node, Grizzly,
/// Payara). Writes report.md, results.json and report.html.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice bench                               # every group, 3 rounds: about 26 minutes on 2 cores\n  \
    sluice bench --quick                       # every group, 1 round: about 4.5 minutes\n  \
    sluice bench --peers haproxy,envoy         # two peers only: about 13 minutes\n  \
    sluice bench --quick --only proxy,protocols,peers\n  \
    sluice bench --rounds 3 --only baseline,proxy,peers\n  \
    sluice bench --only baseline,proxy,peers --duration 10s --pin\n  \
    sluice bench --only lb --conns 500,1000,2000,4000,8000,12000\n  \
    sluice bench --only middleware --handlers oidc,jwt   # two handlers' rows and the chains\n  \
    sluice bench --only io --users 300,1000,1500,3000,5000 --duration 30s\n  \
    sluice bench --only idle,peers             # RSS per idle connection: 1,000 and 10,000, HTTP/1.1 and HTTP/2\n  \
    sluice bench --only runtimes,peers         # the seeds' tables in their own runtimes: about 20 minutes\n  \
    sluice bench --only runtimes --runtimes go-http,node --quick\n  \
    sluice bench --only gateway,peers --peers envoy   # sluice's gateway chain against Envoy's\n  \
    sluice bench --only proxy --baseline old/results.json --max-regression 5%\n\n\
Groups: baseline, proxy, middleware, protocols, lb, lb-slow, io, open, idle, gateway\n\
(only when named: the API gateway chain in sluice and Envoy), and\n\
peers (the rows of every installed peer of --peers: haproxy, nginx, envoy,\n\
traefik, caddy, nghttpx; one that is missing is skipped with a note; all of\n\
them: bash bench/install-peers.sh); runtimes runs only when\n\
named: it builds the seeds' backends on first use (java+mvn, go, node; a\n\
missing toolchain skips its rows with a note) into ~/.cache/sluice/runtimes.\n\
The times are the run's estimate with all six peers (it prints its own at the\n\
start). Each component runs in its own process; the load generator runs in\n\
this one.\n\
With --baseline, each row is compared with the same row of an earlier\n\
results.json (docs/BENCH.md, \"A regression gate\").\n\
Exit status: 0 after a run, 99 when --baseline found a row regressed, 1 when a\n\
component fails (the partial report is still written), 2 for bad input.")]
pub(crate) struct BenchArgs {
    /// Groups to run, comma-separated (default: all but runtimes).
    #[arg(long, value_delimiter = ',', value_parser = parse_group)]
    only: Vec<GroupName>,
    /// Measured time of each row (default 2s, io 2.5s; --quick 1s, io 2s).
    /// Without it, when a row of lb, io or the runtimes groups has a window
    /// shorter than 3x its latency, every row compared with it (its block;
    /// all of lb) is measured again with one longer window (up to 60s).
    #[arg(short, long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Warm-up before each row, discarded (default 0.5s, io 1s; --quick 0.5s, io 1s).
    #[arg(long, value_parser = parse_duration)]
    warmup: Option<Duration>,
    /// Connections of the throughput rows.
    #[arg(short, long, default_value_t = 128)]
    connections: usize,
    /// HTTP/1.1 requests in flight per connection on the throughput rows.
    #[arg(short, long, default_value_t = 1)]
    pipeline: usize,
    /// The system under test alone on the last CPU; load and backends on the others.
    #[arg(long)]
    pin: bool,
    /// Fewer, shorter rows, one round: the whole run in about 4.5 minutes on 2 cores.
    #[arg(long)]
    quick: bool,
    /// Times each row is measured, in an order rotated each round; a row
    /// shows the median (default 3; --quick 1).
    #[arg(long)]
    rounds: Option<usize>,
    /// Top of the lb sweep; lowered further when the open-file limit is too small.
    #[arg(long, default_value_t = 12_000)]
    max_conns: usize,
    /// The lb sweep's connection counts (default 500,2000,12000).
    #[arg(long, value_delimiter = ',')]
    conns: Option<Vec<usize>>,
    /// The io sweep's user counts (default 300,1000,5000).
    #[arg(long, value_delimiter = ',')]
    users: Option<Vec<usize>>,
    /// The open group's arrival rates, requests/s (default 1000,2000).
    #[arg(long, value_delimiter = ',')]
    rates: Option<Vec<f64>>,
    /// The middleware handlers measured alone, comma-separated (default:
    /// every one; --quick jwt,validate); the empty chain and the default
    /// chain always are. `--handlers oidc` measures the oidc row alone.
    #[arg(long, value_delimiter = ',', value_parser = bench::parse_handler)]
    handlers: Vec<&'static str>,
    /// The io users' think time between a response and their next request.
    #[arg(long, default_value = "1s..2s", value_parser = parse_think)]
    think: load::ThinkTime,
    /// The io downstream's delay per message.
    #[arg(long, default_value = "300ms", value_parser = parse_duration)]
    downstream_delay: Duration,
    /// How much slower the lb-slow group's fifth backend answers.
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    slow_delay: Duration,
    /// The seed backends the runtimes group builds and measures (default: all six:
    /// spring-mvc, webflux, go-http, node, grizzly, payara).
    #[arg(long, value_delimiter = ',', value_parser = parse_runtime)]
    runtimes: Vec<Runtime>,
    /// The peers to compare with, comma-separated (default: every one
    /// installed: haproxy, nginx, envoy, traefik, caddy, nghttpx); naming
    /// any adds the peers group to --only.
    #[arg(long, value_delimiter = ',', value_parser = parse_peer)]
    peers: Vec<PeerKind>,
    /// Use ports from here up (each must be free) instead of ports the kernel picks.
    #[arg(long)]
    port_base: Option<u16>,
    /// The results folder (default: results/bench-DATE).
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// No progress; the tables and the summary are still printed.
    #[arg(short, long)]
    quiet: bool,
    /// Compare each row with the same row of this earlier results.json;
    /// a row worse by more than --max-regression (its rounds agreeing)
    /// fails the run (exit 99).
    #[arg(long, value_name = "RESULTS_JSON")]
    baseline: Option<PathBuf>,
    /// With --baseline: how much worse a row may be (req/s lower, p95 or
    /// bytes per idle connection higher) before it fails the run.
    #[arg(long, default_value = "5%", value_parser = bench::baseline::parse_max_regression, requires = "baseline")]
    max_regression: f64,
}

fn parse_group(text: &str) -> Result<GroupName, String> {
    text.trim().parse()
}

fn parse_runtime(text: &str) -> Result<Runtime, String> {
    text.trim().parse()
}

fn parse_peer(text: &str) -> Result<PeerKind, String> {
    text.trim().parse()
}

pub(crate) fn run(args: BenchArgs) -> ExitCode {
    let sluice = match std::env::current_exe() {
        Ok(path) => path,
        Err(err) => {
            eprintln!("sluice bench: error: cannot find this binary: {err}");
            return ExitCode::FAILURE;
        }
    };
    let out = args.out.clone().unwrap_or_else(bench::default_out_dir);
    let mut options = BenchOptions::new(sluice, out);
    if !args.only.is_empty() {
        options.only = args.only.clone();
    }
    options.duration = args.duration;
    options.warmup = args.warmup;
    options.connections = args.connections;
    options.pipeline = args.pipeline;
    options.pin = args.pin;
    options.quick = args.quick;
    options.rounds = args.rounds;
    options.max_conns = args.max_conns;
    options.sweep_conns = args.conns.clone();
    options.sweep_users = args.users.clone();
    options.rates = args.rates.clone();
    if !args.handlers.is_empty() {
        options.handlers = Some(args.handlers.clone());
    }
    options.think = (args.think.min, args.think.max);
    options.downstream_delay = args.downstream_delay;
    options.slow_delay = args.slow_delay;
    options.port_base = args.port_base;
    if !args.runtimes.is_empty() {
        options.runtimes = args.runtimes.clone();
    }
    if !args.peers.is_empty() {
        options.peers = args.peers.clone();
        if !options.runs(GroupName::Peers) {
            options.only.push(GroupName::Peers);
        }
    }
    if let Err(message) = options.validate() {
        eprintln!("sluice bench: error: {message}");
        return ExitCode::from(2);
    }
    let baseline = match args
        .baseline
        .as_deref()
        .map(bench::baseline::read)
        .transpose()
    {
        Ok(baseline) => baseline,
        Err(message) => {
            eprintln!("sluice bench: error: {message}");
            return ExitCode::from(2);
        }
    };
    watch_interrupts(Arc::clone(&options.interrupt));
    let mut terminal = Terminal::new(args.quiet);
    eprintln!(
        "sluice bench: results in {}; groups: {}",
        options.out.display(),
        options
            .only
            .iter()
            .map(|g| g.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let result = bench::run(&options, &mut terminal);
    terminal.clear();
    match result {
        Ok(results) => {
            println!("{}", bench::report::summary(&results));
            println!(
                "Report: {0}/report.md, {0}/report.html, {0}/results.json",
                options.out.display()
            );
            match baseline {
                Some(baseline) => gate(&results, &baseline, args.max_regression, &options.out),
                None => ExitCode::SUCCESS,
            }
        }
        Err(err) => {
            eprintln!("sluice bench: error: {err:#}");
            eprintln!(
                "sluice bench: every component was stopped; what was measured is in {}",
                options.out.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// The regression gate: each row against the baseline's; 99 when one
/// regressed. The comparison is also written as baseline.json.
fn gate(
    results: &bench::Results,
    baseline: &bench::Results,
    max_regression: f64,
    out: &std::path::Path,
) -> ExitCode {
    let comparison = bench::baseline::compare(results, baseline, max_regression);
    print!("{}", comparison.to_text());
    let path = out.join("baseline.json");
    let written = serde_json::to_vec_pretty(&comparison)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&path, json));
    if let Err(err) = written {
        eprintln!(
            "sluice bench: error: cannot write {}: {err}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    let regressed: Vec<String> = comparison
        .regressions()
        .map(|r| format!("{}: {}", r.group, r.label))
        .collect();
    if regressed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "sluice bench: {} row(s) regressed past {:.1}%: {}",
            regressed.len(),
            max_regression * 100.0,
            regressed.join("; ")
        );
        ExitCode::from(99)
    }
}

/// Progress on stderr (a line per row, when both stdout and stderr are
/// terminals), the group tables on stdout.
struct Terminal {
    bar: Option<ProgressBar>,
    started: Instant,
    expected: Duration,
}

impl Terminal {
    fn new(quiet: bool) -> Self {
        let interactive = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let bar = (!quiet && interactive).then(|| {
            let bar = ProgressBar::new(1000);
            bar.set_style(
                ProgressStyle::with_template("{bar:24} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Self {
            bar,
            started: Instant::now(),
            expected: Duration::ZERO,
        }
    }

    fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

/// `4:05`: minutes and seconds.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

impl Observer for Terminal {
    fn run_started(&mut self, expected: Duration) {
        self.started = Instant::now();
        self.expected = expected;
        eprintln!(
            "sluice bench: expected to take about {} (min:s)",
            clock(expected)
        );
    }

    fn group_started(&mut self, name: &str, title: &str) {
        self.say(&format!("== {name}: {title}"));
    }

    fn row_started(&mut self, group: &str, label: &str, round: Round, planned: Duration) {
        if let Some(bar) = &self.bar {
            bar.set_position(0);
            bar.set_message(format!(
                "{group} | {label} | {} ({:.1}s) | {} of ~{}",
                round_name(round),
                planned.as_secs_f64(),
                clock(self.started.elapsed()),
                clock(self.expected),
            ));
        }
    }

    fn progress(&mut self) -> Option<Box<dyn FnMut(load::Progress) + Send>> {
        let bar = self.bar.clone()?;
        Some(Box::new(move |p: load::Progress| {
            if let Some(planned) = p.planned {
                let done = p.elapsed.as_secs_f64() / planned.as_secs_f64().max(1e-9);
                bar.set_position((done.min(1.0) * 1000.0) as u64);
            }
        }))
    }

    fn row_finished(&mut self, label: &str, round: Round, figures: &Figures) {
        let round = if round.warmup {
            " [warm-up, discarded]".to_string()
        } else if round.of > 1 {
            format!(" [{}/{}]", round.index + 1, round.of)
        } else {
            String::new()
        };
        // A long wait for the target to drain is worth seeing as it happens.
        let drain = match figures.drain {
            Some(d) if !d.drained => format!(", started busy after {:.0}s", d.waited_s),
            Some(d) if d.waited_s >= 0.5 => format!(", drained in {:.1}s", d.waited_s),
            _ => String::new(),
        };
        self.say(&format!(
            "   {:<40} {:>12.0} req/s  p99 {:>9}  errors {}  unanswered {}{drain}{round}",
            label,
            figures.requests_per_sec,
            load::format_us(figures.latency.p99_us as f64),
            figures.errors.total(),
            figures.unanswered
        ));
    }

    fn group_finished(&mut self, group: &Group) {
        self.clear_line();
        println!("{}", bench::report::group_table(group));
    }

    fn note(&mut self, note: &str) {
        self.say(&format!("note: {note}"));
    }

    fn build(&mut self, event: BuildEvent<'_>) {
        match event {
            BuildEvent::Cached { runtime, dir } => {
                self.say(&format!("{runtime}: built before, in {}", dir.display()))
            }
            BuildEvent::Started {
                runtime,
                command,
                dir,
            } => self.say(&format!(
                "{runtime}: first use, building in {} (a first JVM build downloads from Maven \
                 Central: minutes): {command}",
                dir.display()
            )),
            // The build tool's lines scroll by on the progress line only.
            BuildEvent::Output { runtime, line } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(format!("building {runtime} | {}", line.trim()));
                }
            }
            BuildEvent::Finished { runtime, elapsed } => self.say(&format!(
                "{runtime}: built in {:.1}s",
                elapsed.as_secs_f64()
            )),
        }
    }

    fn runtime_ready(&mut self, name: &str, took: Duration) {
        self.say(&format!(
            "   {name}: serving after {:.1}s",
            took.as_secs_f64()
        ));
    }
}

/// `round 2/3`, or `warm-up round (discarded)`.
fn round_name(round: Round) -> String {
    if round.warmup {
        "warm-up round (discarded)".to_string()
    } else {
        format!("round {}/{}", round.index + 1, round.of)
    }
}

impl Terminal {
    fn clear_line(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message("");
            bar.set_position(0);
        }
    }
}
