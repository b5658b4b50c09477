//! `sluice proxy -c FILE`: run the reverse proxy until SIGINT or SIGTERM.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;
use proxy::config::{self, LogFormat as ConfigLogFormat};
use tracing::info;

use crate::process::{self, LogFormat};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice proxy -c examples/petstore.yaml\n  \
    sluice proxy -c examples/petstore.yaml --check\n  \
    sluice proxy --schema > sluice.schema.json\n\n\
The configuration keys are in docs/CONFIG.md; --schema prints them as a JSON\n\
Schema, for editors to validate and complete the file with. `${VAR}`, `${VAR:default}` and\n\
`${VAR:?message}` are filled from the environment. A bad file is reported as\n\
FILE:LINE:COLUMN: KEY: message, with exit status 2, before anything is bound.\n\
With gateway_api, --check also prints each Gateway's and HTTPRoute's status\n\
(Accepted, ResolvedRefs and their reasons; docs/GATEWAY-API.md), and exits 1\n\
when one is not accepted or a reference does not resolve.\n\
SIGINT or SIGTERM stops accepting and lets in-flight requests finish until\n\
limits.shutdown_deadline; a second signal exits at once. SIGHUP, POST /reload\n\
on the admin listener, or with --watch a change of the file, reloads the\n\
configuration without dropping a request (docs/CONFIG.md, Reloading); a file\n\
that fails to validate leaves the one in use.")]
pub(crate) struct ProxyArgs {
    /// The YAML configuration file.
    #[arg(short, long, value_name = "FILE", required_unless_present = "schema")]
    config: Option<PathBuf>,
    /// Print the JSON Schema of the configuration file and exit.
    #[arg(long, conflicts_with_all = ["check", "watch"])]
    schema: bool,
    /// Validate the configuration (including that upstream hosts resolve) and exit.
    #[arg(long)]
    check: bool,
    /// Reload the configuration when its file changes (the directory is
    /// watched, so a Kubernetes ConfigMap's symlink swap is seen).
    #[arg(long)]
    watch: bool,
}

pub(crate) fn run(args: ProxyArgs) -> ExitCode {
    let file = match (&args.config, args.schema) {
        (_, true) | (None, _) => {
            let schema = config::json_schema();
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            return ExitCode::SUCCESS;
        }
        (Some(file), false) => file.clone(),
    };
    if let Err(err) = process::ignore_hangups() {
        eprintln!("sluice: error: {err:#}");
        return ExitCode::FAILURE;
    }
    let config = match config::load(&file) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("sluice: {err}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        return match proxy::check(&config) {
            Ok(_) => {
                // Legal but unsafe (an open admin listener): said, not fatal.
                for warning in config::warnings(&config) {
                    eprintln!("sluice: warning: {}: {warning}", file.display());
                }
                // What a Gateway API controller would write in the
                // objects' status; an object not accepted is exit status 1.
                if let Some(report) = &config.gateway_report {
                    print!("{report}");
                    if !report.all_accepted() {
                        println!(
                            "{}: OK, but Gateway API objects above are not accepted or have references that do not resolve",
                            file.display()
                        );
                        return ExitCode::from(1);
                    }
                }
                println!("{}: OK", file.display());
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("sluice: {}: {err:#}", file.display());
                ExitCode::from(2)
            }
        };
    }
    let logging = process::init_logging(log_format(config.log.format), config.log.level.as_deref());
    // The Gateway API objects' status, as `--check` prints it: what is
    // served and what is not is in the log, not only in a dry run.
    if let Some(report) = &config.gateway_report {
        let accepted = report.all_accepted();
        for line in report.to_string().lines() {
            match accepted {
                true => info!(target: "sluice::gateway_api", "{}", line.trim_end()),
                false => tracing::warn!(target: "sluice::gateway_api", "{}", line.trim_end()),
            }
        }
        if !accepted {
            tracing::warn!(target: "sluice::gateway_api", "Gateway API objects above are not accepted or have references that do not resolve: they are not served");
        }
    }
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let options = proxy::Options {
        file: Some(file.clone()),
        watch: args.watch,
        log: Some(Box::new(move |log: &config::LogSettings| {
            logging.apply(log_format(log.format), log.level.as_deref());
        })),
        worker_tick: Some(crate::allocator::give_back_freed_pages),
    };
    let deadline = config.limits.shutdown_deadline;
    let schemes: Vec<&str> = config
        .listeners
        .iter()
        .map(|l| if l.tls.is_some() { "https" } else { "http" })
        .collect();
    let running = match proxy::start_with(config, options) {
        Ok(running) => running,
        Err(err) => {
            eprintln!("sluice: error: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let signals = match process::StopSignals::listen() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("sluice: error: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    // Scripts read the bound addresses from this line when they ask for port 0.
    let listening: Vec<String> = running
        .listeners
        .iter()
        .zip(&schemes)
        .map(|(addr, scheme)| format!("{scheme}://{addr}"))
        .collect();
    match running.admin {
        Some(admin) => println!(
            "sluice proxy listening on {} admin http://{admin}",
            listening.join(" ")
        ),
        None => println!("sluice proxy listening on {}", listening.join(" ")),
    }
    match signals.drain(deadline, move || running.shutdown()) {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("sluice: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn log_format(format: ConfigLogFormat) -> LogFormat {
    match format {
        ConfigLogFormat::Text => LogFormat::Text,
        ConfigLogFormat::Json => LogFormat::Json,
    }
}
