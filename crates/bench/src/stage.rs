//! The run's context: where files go, which ports and CPUs components
//! get, which peers there are, and how components are started.

use std::{
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    time::Duration,
};

/// Which round of how many a sample belongs to (`index` from 0), or
/// which of the warm-up rounds run before them and discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    pub index: usize,
    pub of: usize,
    pub warmup: bool,
}

impl Round {
    pub(crate) fn measured(index: usize, of: usize) -> Self {
        Self {
            index,
            of,
            warmup: false,
        }
    }
}

use anyhow::{bail, Context};

use crate::{
    drain::{DrainProbe, Unloaded},
    machine::{find_peers, find_program, Peer},
    options::{BenchOptions, GroupName, Profile},
    peers::{setup, Site, TlsFiles},
    process::{Component, Launch, Probe},
    results::{Figures, Group},
    runtimes::BuildEvent,
};

/// File descriptors the proxy keeps besides two per client (client side
/// and upstream side).
const SPARE_FDS: u64 = 128;

/// What the caller (the terminal) hears while a run goes.
pub trait Observer {
    /// The run starts; it should take about `expected`.
    fn run_started(&mut self, _expected: Duration) {}
    fn group_started(&mut self, _name: &str, _title: &str) {}
    /// A load run (one round of a row) starts; it should take about `planned`.
    fn row_started(&mut self, _group: &str, _label: &str, _round: Round, _planned: Duration) {}
    /// A progress callback for the load run that starts next.
    fn progress(&mut self) -> Option<Box<dyn FnMut(load::Progress) + Send>> {
        None
    }
    /// One round of a row was measured (or, `round.warmup`, run and discarded).
    fn row_finished(&mut self, _label: &str, _round: Round, _figures: &Figures) {}
    fn group_finished(&mut self, _group: &Group) {}
    fn note(&mut self, _note: &str) {}
    /// A seed backend is being prepared: found in the cache, or built on
    /// first use (every line its build tool prints comes through).
    fn build(&mut self, _event: BuildEvent<'_>) {}
    /// A seed backend answered its readiness probe `took` after its start.
    fn runtime_ready(&mut self, _name: &str, _took: Duration) {}
}

/// Where components run: with `--pin` and 2+ CPUs, the system under test
/// alone on the last CPU and everything else (this process's load
/// threads, backends) on the others.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placement {
    pub(crate) sut: Option<String>,
    pub(crate) others: Option<String>,
}

impl Placement {
    pub(crate) fn pinned(&self) -> bool {
        self.sut.is_some()
    }
}

/// The components of one group and the run's shared state.
pub(crate) struct Bench<'a> {
    pub(crate) options: &'a BenchOptions,
    pub(crate) profile: Profile,
    /// `OUT/work`: generated configs, keys, and every component's log.
    pub(crate) work: PathBuf,
    pub(crate) placement: Placement,
    pub(crate) peers: Vec<Peer>,
    pub(crate) fd_limit: u64,
    /// The lb sweep's top after scaling to the limits.
    pub(crate) max_conns: usize,
    pub(crate) observer: &'a mut dyn Observer,
    pub(crate) notes: Vec<String>,
    /// Groups measured and not yet in the results (see [`Bench::publish`]).
    pub(crate) published: Vec<Group>,
    /// Each probed target's unloaded latency (see [`crate::drain`]).
    pub(crate) unloaded: Unloaded,
    /// The probe of the last row run, drained again before the next.
    pub(crate) previous: Option<DrainProbe>,
    next_port: Option<u16>,
    tls: Option<TlsFiles>,
}

impl<'a> Bench<'a> {
    pub(crate) fn new(
        options: &'a BenchOptions,
        observer: &'a mut dyn Observer,
    ) -> anyhow::Result<Self> {
        let work = options.out.join("work");
        std::fs::create_dir_all(&work)
            .with_context(|| format!("cannot create {}", work.display()))?;
        let fd_limit = raise_fd_limit(options.max_conns);
        let mut bench = Self {
            options,
            profile: options.profile(),
            work,
            placement: Placement::default(),
            peers: Vec::new(),
            fd_limit,
            max_conns: options.max_conns,
            observer,
            notes: Vec::new(),
            published: Vec::new(),
            unloaded: Unloaded::default(),
            previous: None,
            next_port: options.port_base,
            tls: None,
        };
        bench.place()?;
        bench.find_peers();
        bench.scale_sweep();
        Ok(bench)
    }

    pub(crate) fn note(&mut self, note: String) {
        self.observer.note(&note);
        self.notes.push(note);
    }

    /// A group measured: shown, and taken into the results when the group
    /// function returns, even when it fails later (a group function may
    /// publish several, the runtimes group one per seed).
    pub(crate) fn publish(&mut self, group: Group) {
        self.observer.group_finished(&group);
        self.published.push(group);
    }

    fn place(&mut self) -> anyhow::Result<()> {
        if !self.options.pin {
            return Ok(());
        }
        let cpus: Vec<usize> = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| {
                (0..nix::sched::CpuSet::count())
                    .filter(|&c| set.is_set(c).unwrap_or(false))
                    .collect()
            })
            .unwrap_or_default();
        if cpus.len() < 2 {
            self.note(format!(
                "--pin ignored: this process may use {} CPU(s)",
                cpus.len()
            ));
            return Ok(());
        }
        if find_program("taskset").is_none() {
            self.note(
                "--pin ignored: taskset is not installed (apt-get install -y util-linux)".into(),
            );
            return Ok(());
        }
        let (others, sut) = cpus.split_at(cpus.len() - 1);
        let list = |cpus: &[usize]| {
            cpus.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        // This thread's affinity is inherited by the load threads it starts.
        let mut set = nix::sched::CpuSet::new();
        for &cpu in others {
            set.set(cpu).context("cannot build a CPU set")?;
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .context("cannot pin the load generator")?;
        self.placement = Placement {
            sut: Some(list(sut)),
            others: Some(list(others)),
        };
        Ok(())
    }

    fn find_peers(&mut self) {
        if !self.options.runs(GroupName::Peers) {
            return;
        }
        self.peers = find_peers(&self.options.peers);
        for &kind in &self.options.peers {
            if !self.peers.iter().any(|p| p.kind == kind) {
                self.note(format!(
                    "{}: not installed, its rows are skipped (bash bench/install-peers.sh, or {})",
                    kind.name(),
                    kind.install()
                ));
            }
        }
    }

    /// The proxy holds two descriptors per client connection (client and
    /// upstream side): the sweeps stop where the open-file limit does.
    fn scale_sweep(&mut self) {
        if self.fd_limit != 0 {
            let fit = (self.fd_limit.saturating_sub(SPARE_FDS) / 2) as usize;
            self.max_conns = self.max_conns.min(fit);
        }
    }

    /// The points of a sweep that fit under the top, saying so when the
    /// top lowers any.
    pub(crate) fn capped(&mut self, flag: &str, points: Vec<usize>) -> Vec<usize> {
        let top = self.max_conns;
        let (kept, lowered) = cap(&points, top);
        if lowered {
            let why = if top < self.options.max_conns {
                format!(
                    "the open-file limit is {} and a proxy needs two descriptors per \
                     connection (raise it with `ulimit -n` or limits.conf)",
                    self.fd_limit
                )
            } else {
                "--max-conns".to_string()
            };
            self.note(format!("{flag} sweep scaled down to {top}: {why}"));
        }
        kept
    }

    /// A free loopback port: the kernel's pick, or the next from
    /// `--port-base` (which must be free).
    pub(crate) fn port(&mut self) -> anyhow::Result<SocketAddr> {
        match &mut self.next_port {
            None => {
                let listener =
                    TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
                Ok(listener.local_addr()?)
            }
            Some(next) => {
                let addr = SocketAddr::from(([127, 0, 0, 1], *next));
                *next = next
                    .checked_add(1)
                    .context("--port-base: ran out of ports below 65536")?;
                if let Err(err) = TcpListener::bind(addr) {
                    bail!("port {addr} is in use ({err}): choose another --port-base, or leave it out to use free ports");
                }
                Ok(addr)
            }
        }
    }

    pub(crate) fn log(&self, name: &str) -> PathBuf {
        self.work.join(format!("{}.log", file_name(name)))
    }

    /// `sluice serve SERVICE` with one worker, placed with the non-SUT
    /// components unless `sut`.
    pub(crate) fn serve(
        &mut self,
        service: &str,
        extra: &[String],
        sut: bool,
    ) -> anyhow::Result<(Component, SocketAddr)> {
        let addr = self.port()?;
        let mut args = vec![
            "serve".into(),
            service.into(),
            "--listen".into(),
            addr.to_string(),
            "--workers".into(),
            "1".into(),
        ];
        args.extend_from_slice(extra);
        let name = format!("sluice serve {service} ({addr})");
        let component = Component::start(Launch {
            log: self.log(&name),
            name,
            program: &self.options.sluice,
            args,
            env: Vec::new(),
            cpus: self.cpus(sut),
            listens: vec![addr],
            probe: None,
        })?;
        Ok((component, addr))
    }

    /// `sluice proxy -c FILE` with `yaml` written to `work/NAME.yaml`.
    pub(crate) fn sluice_proxy(
        &mut self,
        name: &str,
        yaml: &str,
        listens: &[SocketAddr],
    ) -> anyhow::Result<Component> {
        let config = self.work.join(format!("{}.yaml", file_name(name)));
        std::fs::write(&config, yaml)
            .with_context(|| format!("cannot write {}", config.display()))?;
        Component::start(Launch {
            log: self.log(name),
            name: name.to_string(),
            program: &self.options.sluice,
            args: vec!["proxy".into(), "-c".into(), config.display().to_string()],
            env: Vec::new(),
            cpus: self.cpus(true),
            listens: listens.to_vec(),
            probe: None,
        })
    }

    /// What `sluice proxy --check` says against `yaml` (written where
    /// [`Bench::sluice_proxy`] writes it for `name`): `None` when it takes
    /// it, else its first line.
    pub(crate) fn sluice_refuses(&self, name: &str, yaml: &str) -> anyhow::Result<Option<String>> {
        let config = self.work.join(format!("{}.yaml", file_name(name)));
        std::fs::write(&config, yaml)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let output = std::process::Command::new(&self.options.sluice)
            .args(["proxy", "-c"])
            .arg(&config)
            .arg("--check")
            .output()
            .with_context(|| format!("cannot run {}", self.options.sluice.display()))?;
        if output.status.success() {
            return Ok(None);
        }
        let said = String::from_utf8_lossy(&output.stderr);
        let first = said.lines().map(str::trim).find(|line| !line.is_empty());
        Ok(Some(first.map_or_else(
            || format!("exit status {}", output.status),
            str::to_string,
        )))
    }

    /// A peer playing `site`, as the system under test; `Ok(Err(why))`
    /// when it cannot play it.
    pub(crate) fn peer(
        &mut self,
        peer: &Peer,
        name: &str,
        site: &Site<'_>,
        listen: SocketAddr,
    ) -> anyhow::Result<Result<Component, &'static str>> {
        let dir = self.work.join(file_name(name));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let setup = match setup(peer.kind, site, &dir) {
            Ok(setup) => setup,
            Err(why) => return Ok(Err(why)),
        };
        for (file, text) in &setup.files {
            std::fs::write(file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
        }
        let component = Component::start(Launch {
            log: self.log(name),
            name: name.to_string(),
            program: &peer.path,
            args: setup.args,
            env: setup.env,
            cpus: self.cpus(true),
            listens: vec![listen],
            probe: setup.ready.map(Probe::answering),
        })?;
        Ok(Ok(component))
    }

    pub(crate) fn cpus(&self, sut: bool) -> Option<String> {
        if sut {
            self.placement.sut.clone()
        } else {
            self.placement.others.clone()
        }
    }

    /// A local CA and a certificate for 127.0.0.1 and localhost, made once.
    pub(crate) fn tls(&mut self) -> anyhow::Result<TlsFiles> {
        if let Some(files) = &self.tls {
            return Ok(files.clone());
        }
        let files = TlsFiles::write(&self.work.join("tls"))?;
        self.tls = Some(files.clone());
        Ok(files)
    }
}

/// The open-file limit for a sweep to `max_conns`: this process holds the
/// clients' sockets and a proxy (a child, which inherits the limit) two per
/// client, so root raises even the hard limit to four per connection (at
/// least 65,536; within /proc/sys/fs/nr_open); anyone else gets their hard
/// limit, and the sweep is scaled down to fit it.
fn raise_fd_limit(max_conns: usize) -> u64 {
    let want = (max_conns as u64 * 4 + 1024).max(65_536);
    if let Ok((_, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
        if hard < want {
            // Needs CAP_SYS_RESOURCE; without it the hard limit stays.
            let _ = rlimit::setrlimit(rlimit::Resource::NOFILE, want, want);
        }
    }
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0)
}

/// The points at most `top`, and `top` in place of those above it;
/// whether any was above.
pub(crate) fn cap(points: &[usize], top: usize) -> (Vec<usize>, bool) {
    let mut kept: Vec<usize> = points.iter().copied().filter(|&p| p <= top).collect();
    let lowered = kept.len() < points.len();
    if lowered && !kept.contains(&top) {
        kept.push(top);
    }
    (kept, lowered)
}

/// A name made safe for a file name: `sluice serve petstore (127.0.0.1:80)`
/// becomes `sluice-serve-petstore-127.0.0.1-80`.
fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_are_capped_at_the_top() {
        assert_eq!(
            cap(&[500, 2_000, 12_000], 9_936),
            (vec![500, 2_000, 9_936], true)
        );
        assert_eq!(cap(&[500, 2_000], 9_936), (vec![500, 2_000], false));
        assert_eq!(cap(&[20_000], 100), (vec![100], true));
    }

    #[test]
    fn file_names_are_tame() {
        assert_eq!(
            file_name("sluice serve petstore (127.0.0.1:80)"),
            "sluice-serve-petstore-127.0.0.1-80"
        );
        assert_eq!(file_name("haproxy -> h2c"), "haproxy-h2c");
    }
}
