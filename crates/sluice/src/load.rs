//! `sluice load`: the load generator's command line.

use std::{
    io::IsTerminal,
    path::PathBuf,
    process::ExitCode,
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

use clap::Args;
use http::Method;
use indicatif::{ProgressBar, ProgressStyle};
use load::{
    plan::{run_plan, PlanControl},
    ConfigError, LoadConfig, Progress, Protocol, ThinkTime,
};

use crate::cli::{parse_duration, parse_think, watch_interrupts};
use crate::load_merge::{LoadCommand, ShardArgs};
use crate::load_plan::PlanArgs;

/// Load an HTTP/1.1, HTTP/2 or HTTP/3 server: wrk's closed model with
/// pipelining (h2load's with --h2 or --h3 and -m), wrk2's open model (--rate) with
/// coordinated-omission correction, or Gatling's users (-u, --think, --ramp).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice load -t1 -c128 -d10s http://127.0.0.1:8080/v1/pets\n  \
    sluice load -c128 --pipeline 16 -H 'J-Tenant-Id: 1007' http://127.0.0.1:8080/v1/pets\n  \
    sluice load -c50 --rate 2000 -d30s --warmup 5s http://127.0.0.1:8080/customers\n  \
    sluice load --h2 -c16 -m64 http://127.0.0.1:8080/v1/pets\n  \
    sluice load --h3 -c16 -m32 --cacert ca.pem https://localhost:8443/v1/pets\n  \
    sluice load -n 10000 -c16 -X POST -H 'Content-Type: application/json' \\\n      \
      --body '{\"id\":\"1\",\"delay\":300}' http://127.0.0.1:8081/messages\n  \
    sluice load --requests-file urls.txt -c64 --json result.json\n  \
    sluice load -u 1000 --think 1s..2s --ramp 5s -d60s http://127.0.0.1:8082/passthrough/message\n  \
    sluice load --shard 0/4 --start-at 2025-06-01T12:00:00Z --log shard-0.hlog -c64 --rate 8000 URL\n  \
    sluice load merge shard-*.hlog\n  \
    sluice load --scenario ci.yaml --json result.json --html report.html\n  \
    sluice load --rate-stage 10s:1000 --rate-stage 20s:5000 --threshold 'p99 < 5ms' URL\n  \
    sluice load -c50 --rate 2000 -d60s --metrics-listen 127.0.0.1:9464 URL\n\n\
--h2 speaks h2c (prior knowledge) to http:// URLs and negotiates h2 (ALPN) with\n\
https:// ones; --h3 speaks HTTP/3 over QUIC (UDP) to https:// ones. Latency is\n\
measured per request, pipelined ones and HTTP/2 and HTTP/3 streams included.\n\
With --rate it counts from each request's intended send time, so a stalled server\n\
shows as latency instead of fewer samples; the uncorrected\n\
figures are printed beside it. Requests leave within microseconds of their time\n\
(a timerfd and a short spin, not Tokio's 1 ms timer); the report gives that\n\
send lateness and warns when it is large against the target's latency. With\n\
--think each connection is a user that waits a random time in the range\n\
between a response and its next request (think time is not latency); --ramp\n\
starts the users one by one over that time. --shard i/N runs one part of a\n\
test spread over N processes; each writes --log, `sluice load merge` adds them.\n\
With --scenario FILE the run is the file's scenarios (docs/LOAD.md); --threshold\n\
fails the run when a figure misses it.\n\
Exit status: 0 after a run (errors are reported, not fatal), 99 when a threshold\n\
failed (or stopped the run), 2 for bad input (a scenario file's mistake names its\n\
line and key), 1 for an internal failure.")]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct LoadArgs {
    #[command(subcommand)]
    command: Option<LoadCommand>,
    /// Target URLs (http:// or https://), used round-robin; all on one host and port.
    #[arg(required_unless_present_any = ["requests_file", "scenario"])]
    urls: Vec<String>,
    /// Connections to keep open.
    #[arg(short, long, default_value_t = 10)]
    connections: usize,
    /// Users: the same as --connections (one connection per user).
    #[arg(short = 'u', long, conflicts_with = "connections")]
    users: Option<usize>,
    /// Users model: each user waits a random time in MIN..MAX (or MIN-MAX, or
    /// one fixed time) between a response and its next request (1s..2s, 500ms).
    #[arg(long, value_name = "MIN..MAX", value_parser = parse_think)]
    think: Option<ThinkTime>,
    /// Users model: start the users one by one over this time instead of all at once.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    ramp: Duration,
    /// Threads, each with its own runtime and share of the connections.
    #[arg(short, long, default_value_t = 1)]
    threads: usize,
    /// How long to run after the warm-up (10s, 500ms, 1m; a bare number is seconds).
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Stop after this many requests instead of after --duration.
    #[arg(short = 'n', long = "requests")]
    requests: Option<u64>,
    /// Requests in flight per connection (HTTP/1.1 pipelining), each timed on its own.
    #[arg(short, long, default_value_t = 1)]
    pipeline: usize,
    /// HTTP/2: h2c with prior knowledge for http://, ALPN h2 for https://.
    #[arg(long)]
    h2: bool,
    /// HTTP/3 over QUIC (https:// only, ALPN h3), each connection on its own UDP socket.
    #[arg(long, conflicts_with = "h2")]
    h3: bool,
    /// With --h2 or --h3: streams in flight per connection (h2load's -m), each timed on its own.
    #[arg(short = 'm', long, default_value_t = 1)]
    streams: usize,
    /// Open model: requests per second across all connections (wrk2's -R).
    #[arg(short = 'R', long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Add a header to every request, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Request method for URLs given without one.
    #[arg(short = 'X', long, default_value = "GET", value_parser = parse_method)]
    method: Method,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    body: Option<String>,
    /// Request body read from a file.
    #[arg(long)]
    body_file: Option<PathBuf>,
    /// A file of requests used round-robin: one `[METHOD ]URL` per line, `#` comments.
    #[arg(long, value_name = "FILE")]
    requests_file: Option<PathBuf>,
    /// A request without a response after this long counts as a timeout; also bounds connecting.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
    /// Run this long first and discard the results.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// https: accept any server certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// https: trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Also write the full report (config, percentile spectrum, per-second series, errors) as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
    /// Accepted for wrk compatibility: the distribution is always printed.
    #[arg(long, hide = true)]
    latency: bool,
    #[command(flatten)]
    shard: ShardArgs,
    #[command(flatten)]
    plan: PlanArgs,
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "invalid rate `{text}`: expected requests per second > 0"
        )),
    }
}

fn parse_method(text: &str) -> Result<Method, String> {
    Method::from_bytes(text.as_bytes()).map_err(|_| format!("invalid method `{text}`"))
}

pub(crate) fn run(args: LoadArgs) -> ExitCode {
    if let Some(command) = args.command {
        return crate::load_merge::run(command);
    }
    let plan = args
        .plan
        .plan(|| build_config(&args), |config| args.shard.apply(config));
    let (plan, live) = match plan.and_then(|plan| Ok((plan, args.plan.live()?))) {
        Ok(both) => both,
        Err(err) => return usage_error(&err),
    };
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_interrupts(Arc::clone(&interrupt));
    let bar = (!args.quiet && std::io::stderr().is_terminal()).then(progress_bar);
    let control = PlanControl {
        interrupt,
        on_progress: bar.clone().map(|bar| progress_callback(bar)),
        live,
        intervals: args.plan.wants_intervals(),
        on_metrics_listen: Some(Box::new(|addr| {
            eprintln!("sluice load: live figures at http://{addr}/metrics");
        })),
    };
    let result = run_plan(&plan, control);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = match result {
        Ok(report) => report,
        Err(err) => match err.downcast_ref::<ConfigError>() {
            Some(config_error) => return usage_error(config_error),
            None => {
                eprintln!("sluice load: error: {err:#}");
                return ExitCode::FAILURE;
            }
        },
    };
    args.plan
        .finish(&report, args.shard.logs_to_stdout(), args.json.as_deref())
}

fn usage_error(err: &ConfigError) -> ExitCode {
    eprintln!("sluice load: error: {err}");
    ExitCode::from(2)
}

fn build_config(args: &LoadArgs) -> Result<LoadConfig, ConfigError> {
    let mut urls: Vec<(Method, String)> = args
        .urls
        .iter()
        .map(|url| (args.method.clone(), url.clone()))
        .collect();
    if let Some(path) = &args.requests_file {
        let text = std::fs::read_to_string(path)
            .map_err(|err| ConfigError(format!("--requests-file {}: {err}", path.display())))?;
        let listed = load::parse_requests_file(&text, &args.method)
            .map_err(|err| ConfigError(format!("--requests-file {}: {err}", path.display())))?;
        urls.extend(listed);
    }
    let mut config = LoadConfig::new(&urls)?;
    config.headers = args
        .headers
        .iter()
        .map(|h| load::parse_header(h).map_err(ConfigError))
        .collect::<Result<_, _>>()?;
    config.body = match (&args.body, &args.body_file) {
        (Some(body), _) => body.clone().into(),
        (None, Some(path)) => std::fs::read(path)
            .map_err(|err| ConfigError(format!("--body-file {}: {err}", path.display())))?
            .into(),
        (None, None) => Default::default(),
    };
    config.connections = args.users.unwrap_or(args.connections);
    config.threads = args.threads;
    config.duration = args.duration;
    config.total_requests = args.requests;
    config.protocol = match (args.h2, args.h3) {
        (true, _) => Protocol::Http2,
        (_, true) => Protocol::Http3,
        _ => Protocol::Http1,
    };
    config.pipeline = args.pipeline;
    config.streams = args.streams;
    config.rate = args.rate;
    config.timeout = args.timeout;
    config.warmup = args.warmup;
    config.insecure = args.insecure;
    config.cacert = args.cacert.clone();
    config.think = args.think;
    config.ramp = args.ramp;
    args.plan.apply_stages(&mut config);
    Ok(config)
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar
}

fn progress_callback(bar: ProgressBar) -> Box<dyn FnMut(Progress) + Send> {
    let mut last = (Duration::ZERO, 0u64);
    Box::new(move |p: Progress| {
        let (last_elapsed, last_responses) = last;
        let window = (p.elapsed - last_elapsed).as_secs_f64().max(1e-3);
        let rate = (p.responses - last_responses) as f64 / window;
        last = (p.elapsed, p.responses);
        let phase = if p.warming_up {
            "warming up"
        } else {
            "running"
        };
        let planned = p.planned.map_or(String::new(), |planned| {
            format!(" / {:.0}s", planned.as_secs_f64())
        });
        bar.set_message(format!(
            "{phase} {:.1}s{planned}  {} responses  {} req/s",
            p.elapsed.as_secs_f64(),
            p.responses,
            load::format_count(rate)
        ));
        bar.tick();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn think(min_ms: u64, max_ms: u64) -> ThinkTime {
        ThinkTime {
            min: Duration::from_millis(min_ms),
            max: Duration::from_millis(max_ms),
        }
    }

    #[test]
    fn think_times_parse_as_ranges_or_one_value() {
        assert_eq!(parse_think("1s..2s"), Ok(think(1000, 2000)));
        assert_eq!(parse_think("1s-2s"), Ok(think(1000, 2000)));
        assert_eq!(parse_think("500ms..1s"), Ok(think(500, 1000)));
        assert_eq!(parse_think("1..3"), Ok(think(1000, 3000)));
        assert_eq!(parse_think("1s"), Ok(think(1000, 1000)));
        assert_eq!(parse_think("0"), Ok(think(0, 0)));
        assert_eq!(parse_think(" 1s .. 2s "), Ok(think(1000, 2000)));
    }

    #[test]
    fn bad_think_times_say_what_is_expected() {
        for bad in [
            "",
            "soon",
            "1s..",
            "..2s",
            "2s..1s",
            "1s..2s..3s",
            "-1s",
            "1s-x",
        ] {
            let err = parse_think(bad).expect_err(bad);
            assert!(err.starts_with("invalid think time"), "{bad}: {err}");
            assert!(err.contains("MIN..MAX"), "{bad}: {err}");
        }
    }

    #[test]
    fn users_set_the_connections() {
        use clap::Parser;

        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            load: LoadArgs,
        }
        let url = "http://127.0.0.1:1/";
        let cli =
            Cli::try_parse_from(["load", "-u", "7", "--think", "1s..2s", "--ramp", "5s", url])
                .expect("parses");
        let config = build_config(&cli.load).expect("valid");
        assert_eq!(config.connections, 7);
        assert_eq!(config.think, Some(think(1000, 2000)));
        assert_eq!(config.ramp, Duration::from_secs(5));
        let plain = Cli::try_parse_from(["load", "-c", "3", url]).expect("parses");
        assert_eq!(build_config(&plain.load).expect("valid").connections, 3);
        assert!(Cli::try_parse_from(["load", "-u", "3", "-c", "4", url]).is_err());
    }
}
