//! What a bench run is asked to do, and the profile (`--quick` or the
//! default) that fills in what was not asked.

use std::{
    fmt,
    path::PathBuf,
    str::FromStr,
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

use crate::{machine::PeerKind, runtimes::Runtime};

/// The named groups of `--only`: one per benchmark question (the groups'
/// table at the top of docs/BENCH.md), `runtimes` (the seeds' own
/// backends, in their runtimes), and `peers` for the peers' rows of every
/// group (HAProxy, nginx, Envoy, Traefik, Caddy, nghttpx: those of
/// `--peers` that are installed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupName {
    Baseline,
    Proxy,
    Middleware,
    Protocols,
    Lb,
    LbSlow,
    Io,
    Open,
    Idle,
    Gateway,
    Runtimes,
    Peers,
}

impl GroupName {
    pub const ALL: [GroupName; 12] = [
        Self::Baseline,
        Self::Proxy,
        Self::Middleware,
        Self::Protocols,
        Self::Lb,
        Self::LbSlow,
        Self::Io,
        Self::Open,
        Self::Idle,
        Self::Gateway,
        Self::Runtimes,
        Self::Peers,
    ];

    /// Whether it runs without `--only`: every group but `runtimes`, which
    /// builds and starts JVMs for minutes, and `gateway`, a question of its
    /// own (issue 49); both run only when named.
    pub fn in_default_run(self) -> bool {
        !matches!(self, Self::Runtimes | Self::Gateway)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Proxy => "proxy",
            Self::Middleware => "middleware",
            Self::Protocols => "protocols",
            Self::Lb => "lb",
            Self::LbSlow => "lb-slow",
            Self::Io => "io",
            Self::Open => "open",
            Self::Idle => "idle",
            Self::Gateway => "gateway",
            Self::Runtimes => "runtimes",
            Self::Peers => "peers",
        }
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GroupName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|g| g.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|g| g.as_str()).collect();
                format!("unknown group `{text}`: expected {}", names.join(", "))
            })
    }
}

/// Everything `sluice bench` was asked. `None` means "the profile's value".
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The sluice binary to start backends and proxies from (this one).
    pub sluice: PathBuf,
    /// The results folder: report.md, results.json, report.html, and
    /// `work/` with every generated config and every component's log.
    pub out: PathBuf,
    pub only: Vec<GroupName>,
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub connections: usize,
    pub pipeline: usize,
    pub pin: bool,
    pub quick: bool,
    /// Times each row is measured (default 3; `--quick` 1).
    pub rounds: Option<usize>,
    /// The top of the lb sweep (it is also capped by the open-file limit).
    pub max_conns: usize,
    /// The lb sweep's points, instead of the profile's.
    pub sweep_conns: Option<Vec<usize>>,
    /// The io sweep's user counts, instead of the profile's.
    pub sweep_users: Option<Vec<usize>>,
    /// The open group's arrival rates (requests/s), instead of the profile's.
    pub rates: Option<Vec<f64>>,
    /// The middleware handlers measured alone, instead of the profile's
    /// (`--handlers`; names from [`ALL_HANDLERS`], see [`parse_handler`]).
    pub handlers: Option<Vec<&'static str>>,
    /// The io users' think time range.
    pub think: (Duration, Duration),
    /// The io downstream's delay.
    pub downstream_delay: Duration,
    /// How much slower the lb-slow group's slow backend answers.
    pub slow_delay: Duration,
    /// The seed backends the runtimes group builds and measures.
    pub runtimes: Vec<Runtime>,
    /// The peers whose rows the `peers` group adds, when installed.
    pub peers: Vec<PeerKind>,
    /// Use ports from here up instead of free ones the kernel picks.
    pub port_base: Option<u16>,
    /// Set it to stop the run (Ctrl-C): the current row ends, components stop.
    pub interrupt: Arc<AtomicBool>,
}

impl BenchOptions {
    /// The defaults: every group but `runtimes`, 128 connections, the lb
    /// sweep to 12,000.
    pub fn new(sluice: PathBuf, out: PathBuf) -> Self {
        Self {
            sluice,
            out,
            only: GroupName::ALL
                .into_iter()
                .filter(|g| g.in_default_run())
                .collect(),
            duration: None,
            warmup: None,
            connections: 128,
            pipeline: 1,
            pin: false,
            quick: false,
            rounds: None,
            max_conns: 12_000,
            sweep_conns: None,
            sweep_users: None,
            rates: None,
            handlers: None,
            think: (Duration::from_secs(1), Duration::from_secs(2)),
            downstream_delay: Duration::from_millis(300),
            slow_delay: Duration::from_millis(40),
            runtimes: Runtime::ALL.to_vec(),
            peers: PeerKind::ALL.to_vec(),
            port_base: None,
            interrupt: Arc::default(),
        }
    }

    /// Mistakes in what was asked, as one message naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.only.is_empty() {
            return Err("--only: name at least one group".into());
        }
        if self.only.iter().all(|g| *g == GroupName::Peers) {
            return Err(
                "--only peers adds the peers' rows to other groups: name a group too".into(),
            );
        }
        if self.connections == 0 {
            return Err("--connections must be at least 1".into());
        }
        if self.pipeline == 0 {
            return Err("--pipeline must be at least 1".into());
        }
        if self.rounds.is_some_and(|r| !(1..=20).contains(&r)) {
            return Err("--rounds: between 1 and 20".into());
        }
        if self.max_conns == 0 {
            return Err("--max-conns must be at least 1".into());
        }
        for (flag, points) in [
            ("--conns", &self.sweep_conns),
            ("--users", &self.sweep_users),
        ] {
            if points
                .as_ref()
                .is_some_and(|p| p.is_empty() || p.contains(&0))
            {
                return Err(format!(
                    "{flag}: give counts of at least 1, comma-separated"
                ));
            }
        }
        if let Some(rates) = &self.rates {
            if rates.is_empty() || rates.iter().any(|r| !r.is_finite() || *r <= 0.0) {
                return Err("--rates: give requests per second above 0, comma-separated".into());
            }
        }
        if self.handlers.as_ref().is_some_and(Vec::is_empty) {
            return Err("--handlers: name at least one handler".into());
        }
        if self.runtimes.is_empty() {
            return Err("--runtimes: name at least one runtime".into());
        }
        if self.peers.is_empty() {
            return Err("--peers: name at least one peer".into());
        }
        if self.think.0 > self.think.1 {
            return Err("--think: the shortest pause is longer than the longest".into());
        }
        for (flag, value) in [("--duration", self.duration), ("--warmup", self.warmup)] {
            if value.is_some_and(|d| d > Duration::from_secs(3600)) {
                return Err(format!("{flag}: at most an hour per row"));
            }
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err("--duration must be longer than 0".into());
        }
        Ok(())
    }

    /// The same options with `out` and `sluice` made absolute against
    /// the working directory (nothing is resolved through symlinks).
    pub fn absolute(&self) -> std::io::Result<Self> {
        Ok(Self {
            sluice: std::path::absolute(&self.sluice)?,
            out: std::path::absolute(&self.out)?,
            ..self.clone()
        })
    }

    pub fn runs(&self, group: GroupName) -> bool {
        self.only.contains(&group)
    }

    /// The sizes and times the run uses.
    pub fn profile(&self) -> Profile {
        let base = if self.quick {
            Profile::QUICK
        } else {
            Profile::DEFAULT
        };
        let duration = self.duration.unwrap_or(base.duration);
        let warmup = self.warmup.unwrap_or(base.warmup);
        Profile {
            duration,
            warmup,
            // The users model needs its users to come round a few times.
            io_duration: self.duration.unwrap_or(base.io_duration),
            io_warmup: self.warmup.unwrap_or(base.io_warmup),
            ..base
        }
    }

    /// Times each row is measured; its figures are their median.
    pub fn rounds(&self) -> usize {
        self.rounds.unwrap_or(if self.quick { 1 } else { 3 })
    }

    pub fn lb_points(&self) -> Vec<usize> {
        self.sweep_conns
            .clone()
            .unwrap_or_else(|| self.profile().lb_points.to_vec())
    }

    pub fn io_points(&self) -> Vec<usize> {
        self.sweep_users
            .clone()
            .unwrap_or_else(|| self.profile().io_users.to_vec())
    }

    /// The middleware handlers measured alone: `--handlers`, else the
    /// profile's (the empty chain and the default chain always are).
    pub fn handlers(&self) -> Vec<&'static str> {
        self.handlers
            .clone()
            .unwrap_or_else(|| self.profile().handlers.to_vec())
    }

    pub fn open_rates(&self) -> Vec<f64> {
        self.rates
            .clone()
            .unwrap_or_else(|| self.profile().open_rates.to_vec())
    }
}

/// Sizes and times of a run.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub duration: Duration,
    pub warmup: Duration,
    pub io_duration: Duration,
    pub io_warmup: Duration,
    /// Middleware handlers measured alone (the empty chain and the full
    /// default chain always are).
    pub handlers: &'static [&'static str],
    pub lb_points: &'static [usize],
    pub io_users: &'static [usize],
    pub open_rates: &'static [f64],
    /// The idle group's connection counts.
    pub idle_points: &'static [usize],
}

/// A handler `--handlers` names: one of [`ALL_HANDLERS`] (`ext_authz
/// cached` also as `ext_authz_cached`).
pub fn parse_handler(text: &str) -> Result<&'static str, String> {
    let text = text.trim();
    ALL_HANDLERS
        .iter()
        .copied()
        .find(|name| *name == text || name.replace(' ', "_") == text)
        .ok_or_else(|| {
            format!(
                "unknown handler `{text}`: expected {}",
                ALL_HANDLERS
                    .iter()
                    .map(|name| name.replace(' ', "_"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Every handler the default chain can hold, measured alone, and `oidc`
/// (a row where node and the OIDC provider are installed).
const ALL_HANDLERS: &[&str] = &[
    "correlation",
    "headers",
    "metrics",
    "cors",
    "ip_filter",
    "body_limit",
    "access_log",
    "rate_limit",
    "jwt",
    "validate",
    "api_key",
    "basic_auth",
    "ext_authz",
    "ext_authz cached",
    "oidc",
];

impl Profile {
    /// About eight minutes a round on two cores with every peer, 24 for
    /// the default three (the run's estimate, `groups::expected`). Every
    /// peer joins every group it can play, so the sweeps have three
    /// points and a row 2 s after a 0.5 s warm-up on its connections.
    pub const DEFAULT: Profile = Profile {
        duration: Duration::from_secs(2),
        warmup: Duration::from_millis(500),
        io_duration: Duration::from_millis(2500),
        io_warmup: Duration::from_secs(1),
        handlers: ALL_HANDLERS,
        lb_points: &[500, 2_000, 12_000],
        io_users: &[300, 1_000, 5_000],
        open_rates: &[1_000.0, 2_000.0],
        idle_points: &[1_000, 10_000],
    };

    /// About three minutes on two cores with every peer, in one round
    /// (the run's estimate).
    pub const QUICK: Profile = Profile {
        duration: Duration::from_secs(1),
        warmup: Duration::from_millis(500),
        io_duration: Duration::from_secs(2),
        io_warmup: Duration::from_secs(1),
        handlers: &["jwt", "validate"],
        lb_points: &[500, 2_000],
        io_users: &[300, 1_000],
        open_rates: &[1_000.0],
        idle_points: &[1_000],
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_round_trip() {
        for group in GroupName::ALL {
            assert_eq!(group.as_str().parse::<GroupName>(), Ok(group));
        }
        let err = "bogus".parse::<GroupName>().expect_err("unknown");
        assert!(err.contains("baseline, proxy"), "{err}");
    }

    #[test]
    fn runtimes_and_gateway_run_only_when_named() {
        let options = BenchOptions::new("sluice".into(), "out".into());
        assert!(!options.runs(GroupName::Runtimes));
        assert!(!options.runs(GroupName::Gateway));
        assert_eq!(options.only.len(), GroupName::ALL.len() - 2);
        assert!(options.runs(GroupName::Peers));
    }

    #[test]
    fn asked_values_win_over_the_profile() {
        let mut options = BenchOptions::new("sluice".into(), "out".into());
        assert_eq!(options.profile().duration, Profile::DEFAULT.duration);
        options.quick = true;
        options.duration = Some(Duration::from_secs(7));
        let profile = options.profile();
        assert_eq!(profile.duration, Duration::from_secs(7));
        assert_eq!(profile.io_duration, Duration::from_secs(7));
        assert_eq!(profile.warmup, Profile::QUICK.warmup);
        assert_eq!(options.lb_points(), Profile::QUICK.lb_points);
        options.sweep_conns = Some(vec![10, 20]);
        assert_eq!(options.lb_points(), vec![10, 20]);
        assert_eq!(options.handlers(), Profile::QUICK.handlers);
        options.handlers = Some(vec!["oidc"]);
        assert_eq!(options.handlers(), ["oidc"]);
    }

    #[test]
    fn handlers_are_named_as_their_rows() {
        assert_eq!(parse_handler(" jwt"), Ok("jwt"));
        assert_eq!(parse_handler("ext_authz_cached"), Ok("ext_authz cached"));
        assert_eq!(parse_handler("ext_authz cached"), Ok("ext_authz cached"));
        let err = parse_handler("jwt_auth").expect_err("unknown");
        assert!(err.contains("ext_authz_cached, oidc"), "{err}");
        let mut options = BenchOptions::new("sluice".into(), "out".into());
        options.handlers = Some(Vec::new());
        assert!(options.validate().unwrap_err().contains("--handlers"));
    }
}
