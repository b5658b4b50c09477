//! Live configuration (docs/CONFIG.md, "Reloading"): a reload reads the
//! file again, validates it as `--check` does, compiles a plan that keeps
//! the state of what did not change (pools and health of the hosts that
//! stay, handler instances with the same settings, metrics by name) and
//! swaps it in; requests in flight finish on the plan they started with.
//! A file that fails leaves the plan in use and says why on `/config`.
//! Discovery rounds compile a new plan the same way when a host name's
//! addresses changed.
//!
//! One reload at a time: SIGHUP, `POST /reload`, `--watch` and discovery
//! all go through [`Reloader`], which holds its state under one lock.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::Arc,
    time::{Instant, SystemTime},
};

use serde_json::json;
use tokio::sync::{Mutex, Notify, Semaphore};
use tracing::{info, warn};

use super::bound::Bound;
use crate::{
    config::{self, Config},
    plan::{Compile, Plan, Plans},
    telemetry::Metrics,
    upstream::discovery::{self, Answers, Resolver},
};

/// Called with the new `log` settings after a reload that changed them.
pub type LogHook = Box<dyn Fn(&config::LogSettings) + Send + Sync>;

/// The live configuration and how to change it.
pub(crate) struct Reloader {
    file: Option<PathBuf>,
    plans: Arc<Plans>,
    metrics: Arc<Metrics>,
    shards: usize,
    connections: Arc<Semaphore>,
    log: Option<LogHook>,
    state: Mutex<State>,
    /// Wakes the discovery loop when a reload changed what is due.
    pub(super) rescheduled: Notify,
    /// What `/config` shows, rendered after each change.
    shown: std::sync::Mutex<Arc<Vec<u8>>>,
    /// The configuration in use, for the admin API's own settings.
    in_use: std::sync::Mutex<Arc<Config>>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// What the last reloads left.
#[derive(Debug)]
struct State {
    config: Arc<Config>,
    /// The open listeners.
    bound: Bound,
    answers: Answers,
    /// When each name is to be resolved again.
    due: BTreeMap<String, Instant>,
    sha256: Option<String>,
    loaded_at: SystemTime,
    last_error: Option<(SystemTime, String)>,
}

/// Why a reload did not happen.
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// The proxy was started from a configuration, not a file.
    NoFile,
    /// The file failed: the message `--check` would print.
    Invalid(String),
}

impl Reloader {
    #[allow(clippy::too_many_arguments)] // Built once, in `start`.
    pub(super) fn new(
        file: Option<PathBuf>,
        config: Config,
        answers: Answers,
        plans: Arc<Plans>,
        metrics: Arc<Metrics>,
        shards: usize,
        bound: Bound,
        connections: Arc<Semaphore>,
        log: Option<LogHook>,
    ) -> Self {
        let sha256 = file
            .as_ref()
            .and_then(|path| std::fs::read(path).ok())
            .map(|bytes| sha256(&bytes));
        // Names are asked again soon, to learn their TTLs.
        let soon = Instant::now() + config.discovery.min_interval;
        let due = answers.keys().map(|name| (name.clone(), soon)).collect();
        let config = Arc::new(config);
        let state = State {
            config: Arc::clone(&config),
            bound,
            answers,
            due,
            sha256,
            loaded_at: SystemTime::now(),
            last_error: None,
        };
        let reloader = Self {
            file,
            plans,
            metrics,
            shards,
            connections,
            log,
            shown: std::sync::Mutex::new(Arc::new(Vec::new())),
            in_use: std::sync::Mutex::new(config),
            state: Mutex::new(state),
            rescheduled: Notify::new(),
        };
        if let Ok(state) = reloader.state.try_lock() {
            reloader.show(&state);
        }
        reloader
    }

    /// The body of `/config`.
    pub(crate) fn shown(&self) -> Arc<Vec<u8>> {
        self.shown
            .lock()
            .map(|shown| Arc::clone(&shown))
            .unwrap_or_default()
    }

    /// The configuration in use (what the last successful reload read).
    pub(crate) fn config(&self) -> Arc<Config> {
        match self.in_use.lock() {
            Ok(config) => Arc::clone(&config),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The file's content differs from the one last loaded (or cannot be read).
    pub(crate) async fn file_changed(&self) -> bool {
        let Some(path) = &self.file else {
            return false;
        };
        let now = std::fs::read(path).ok().map(|bytes| sha256(&bytes));
        now.is_none() || now != self.state.lock().await.sha256
    }

    /// Reads the file again and, if it is valid, serves it; `trigger` names
    /// what asked (for the log). Returns the new plan's generation.
    /// The TLS listeners' files are read again whatever the outcome.
    pub(crate) async fn reload(&self, trigger: &str) -> Result<u64, ReloadError> {
        let mut state = self.state.lock().await;
        reload_tls(&state.bound);
        let Some(path) = &self.file else {
            return Err(ReloadError::NoFile);
        };
        let outcome = self.reload_locked(&mut state, path).await;
        self.metrics.reload_done(outcome.is_ok());
        match &outcome {
            Ok(generation) => {
                state.last_error = None;
                info!(trigger, file = %path.display(), generation, "configuration reloaded");
            }
            Err(message) => {
                state.last_error = Some((SystemTime::now(), message.clone()));
                warn!(trigger, error = %message, "configuration reload failed; the configuration in use stays");
            }
        }
        self.show(&state);
        drop(state);
        self.rescheduled.notify_one();
        outcome.map_err(ReloadError::Invalid)
    }

    async fn reload_locked(&self, state: &mut State, path: &PathBuf) -> Result<u64, String> {
        let bytes = std::fs::read(path)
            .map_err(|err| format!("{}: cannot read the file: {err}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let config = config::parse(&text, path, |name| std::env::var(name).ok())
            .map_err(|err| err.to_string())?;
        let invalid = |err: anyhow::Error| format!("{}: {err:#}", path.display());
        let mut resolver = Resolver::new(&config.discovery);
        let failed = || self.metrics.discovery_failed();
        let (answers, due) = discovery::resolve_all(&mut resolver, &config, &state.answers, failed)
            .await
            .map_err(invalid)?;
        let endpoints = super::endpoints(&config).map_err(invalid)?;
        // Bound before the plan is served: a port in use fails the reload.
        let listeners = state.bound.prepare(&config, endpoints).map_err(invalid)?;
        let generation = self.swap(&config, &answers).map_err(invalid)?;
        state.bound.commit(listeners).await;
        self.apply_fixed(&state.config, &config);
        state.config = Arc::new(config);
        state.answers = answers;
        state.due = due;
        state.sha256 = Some(sha256(&bytes));
        state.loaded_at = SystemTime::now();
        Ok(generation)
    }

    /// Compiles `config` with `answers` over the plan in use and stores it;
    /// retires the hosts the new plan dropped. Returns its generation.
    fn swap(&self, config: &Config, answers: &Answers) -> anyhow::Result<u64> {
        let old = self.plans.load();
        let plan = Arc::new(Plan::compile_with(
            config,
            &Compile {
                shards: self.shards,
                metrics: &self.metrics,
                answers,
                previous: Some(&old),
                check: false,
            },
        )?);
        let generation = self.plans.store(Arc::clone(&plan));
        let retired = old.retire_dropped_hosts(&plan, |worker| self.metrics.shard(worker));
        if retired > 0 {
            info!(
                hosts = retired,
                "hosts left the configuration; their connections drain"
            );
        }
        Ok(generation)
    }

    /// Applies what changes outside the plan (connection limit, log
    /// settings) and logs what cannot change without a restart.
    fn apply_fixed(&self, old: &Config, new: &Config) {
        let fixed = |what: &str, old: String, new: String| {
            if old != new {
                warn!(setting = what, from = %old, to = %new, "this setting does not change at runtime; restart to apply it");
            }
        };
        fixed(
            "workers",
            format!("{:?}", old.workers),
            format!("{:?}", new.workers),
        );
        fixed(
            "runtime",
            format!("{:?}", old.runtime),
            format!("{:?}", new.runtime),
        );
        fixed(
            "admin.address",
            format!("{:?}", old.admin.as_ref().map(|a| &a.address.value)),
            format!("{:?}", new.admin.as_ref().map(|a| &a.address.value)),
        );
        fixed(
            "limits.shutdown_deadline",
            format!("{:?}", old.limits.shutdown_deadline),
            format!("{:?}", new.limits.shutdown_deadline),
        );
        let (before, after) = (old.limits.max_connections, new.limits.max_connections);
        if after > before {
            self.connections.add_permits(after - before);
        } else if after < before {
            // Permits in use are forgotten as their connections close.
            let connections = Arc::clone(&self.connections);
            let fewer = u32::try_from(before - after).unwrap_or(u32::MAX);
            tokio::spawn(async move {
                if let Ok(permits) = connections.acquire_many_owned(fewer).await {
                    permits.forget();
                }
            });
        }
        for warning in config::warnings(new) {
            warn!("{warning}");
        }
        if old.log != new.log {
            match &self.log {
                Some(hook) => hook(&new.log),
                None => fixed("log", format!("{:?}", old.log), format!("{:?}", new.log)),
            }
        }
    }

    /// Resolves the names that are due; when an answer changed, compiles
    /// and serves the configuration in use with the new addresses.
    /// Returns when the next name is due.
    pub(crate) async fn rediscover<'r>(
        &self,
        resolver: impl FnOnce() -> &'r mut Resolver,
    ) -> Instant {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let due: Vec<String> = state
            .due
            .iter()
            .filter(|(_, &at)| at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        let mut answers = state.answers.clone();
        if let Some(resolver) = (!due.is_empty()).then(resolver) {
            resolver.read_hosts_file();
            for name in due {
                match resolver.resolve(&name).await {
                    Ok(answer) => {
                        state.due.insert(name.clone(), answer.next);
                        answers.insert(name, answer.addresses);
                    }
                    Err(err) => {
                        self.metrics.discovery_failed();
                        warn!(host = %name, error = %format!("{err:#}"), "resolution failed; the last answer stays");
                        let retry = Instant::now() + resolver.retry_after();
                        state.due.insert(name, retry);
                    }
                }
            }
        }
        if answers != state.answers {
            let config = Arc::clone(&state.config);
            match self.swap(&config, &answers) {
                Ok(generation) => {
                    self.metrics.discovery_changed();
                    info!(generation, "upstream addresses changed");
                    state.answers = answers;
                    self.show(&state);
                }
                Err(err) => warn!(error = %format!("{err:#}"), "cannot compile the new addresses"),
            }
        }
        let max = state.config.discovery.max_interval;
        state.due.values().min().copied().unwrap_or(now + max)
    }

    /// The discovery settings in use.
    pub(crate) async fn discovery(&self) -> config::DiscoverySettings {
        self.state.lock().await.config.discovery.clone()
    }

    /// Renders `/config`: the effective configuration and the reload status.
    fn show(&self, state: &State) {
        let time = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        let mut body = super::shown::effective(&state.config);
        body["reload"] = json!({
            "generation": self.plans.generation(),
            "file": self.file.as_ref().map(|f| f.display().to_string()),
            "sha256": state.sha256,
            "loaded_at": time(state.loaded_at),
            "last_error": state.last_error.as_ref().map(|(at, message)| json!({ "at": time(*at), "message": message })),
            "resolved": state.answers.iter().map(|(name, addrs)| (name.clone(), addrs.iter().map(ToString::to_string).collect::<Vec<_>>())).collect::<BTreeMap<_, _>>(),
        });
        super::shown::redact(&mut body, &state.config.substituted.0);
        let rendered = serde_json::to_vec_pretty(&body).unwrap_or_default();
        if let Ok(mut shown) = self.shown.lock() {
            *shown = Arc::new(rendered);
        }
        if let Ok(mut in_use) = self.in_use.lock() {
            *in_use = Arc::clone(&state.config);
        }
    }
}

/// Reads the TLS listeners' files again; a failure keeps the ones in use.
fn reload_tls(bound: &Bound) {
    for listener in bound.tls() {
        let cert = listener.cert_path().display();
        match listener.reload() {
            Ok(()) => info!(%cert, "TLS certificate reloaded"),
            Err(err) => warn!(%err, "TLS reload failed; the previous certificate stays in use"),
        }
    }
}

/// The file's SHA-256, in hex.
fn sha256(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().fold(String::new(), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}
