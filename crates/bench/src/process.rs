//! The processes a bench run starts: each component (backend, proxy,
//! peer) is a child with its own log file, optionally pinned to CPUs, and
//! always stopped when its handle drops, so that no run, failed or
//! interrupted, leaves a process behind.

use std::{
    fs::File,
    io::{Read, Seek, SeekFrom},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use load::procfs::status_kib;
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

/// How long a component gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a component gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// The same for a component with a readiness probe (a runtime: a JVM
/// takes longer, and Payara Micro removes its temporary folder only when
/// it exits on SIGTERM; Traefik, which exits within its 1 s grace anyway).
const RUNTIME_STOP_GRACE: Duration = Duration::from_secs(15);
/// Log bytes quoted when a component fails.
const LOG_TAIL: u64 = 2048;

impl Probe {
    /// Ready once `GET path` answers 200, within the usual start time.
    pub(crate) fn answering(path: String) -> Self {
        Self {
            path,
            timeout: START_TIMEOUT,
        }
    }
}

/// A running component.
#[derive(Debug)]
pub(crate) struct Component {
    /// What it is, as messages and reports name it: `sluice proxy`, `nginx`.
    pub(crate) name: String,
    child: Child,
    log: PathBuf,
    grace: Duration,
}

/// When a runtime is ready: `GET path` on its first address answers 200
/// within `timeout` (Payara Micro accepts connections, and answers 404,
/// seconds before its application is deployed).
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) path: String,
    pub(crate) timeout: Duration,
}

/// What to start.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) name: String,
    pub(crate) program: &'a Path,
    pub(crate) args: Vec<String>,
    /// Set in its environment besides what it inherits (`GOMAXPROCS=1`).
    pub(crate) env: Vec<(String, String)>,
    /// Run under `taskset -c CPUS` (from the run's placement).
    pub(crate) cpus: Option<String>,
    /// Where its stdout and stderr go.
    pub(crate) log: PathBuf,
    /// Ready once something accepts here.
    pub(crate) listens: Vec<SocketAddr>,
    /// A runtime: ready once its first address answers this probe instead.
    pub(crate) probe: Option<Probe>,
}

impl Component {
    /// Starts a component and waits until it accepts on every address.
    pub(crate) fn start(launch: Launch<'_>) -> anyhow::Result<Self> {
        let log = File::create(&launch.log)
            .with_context(|| format!("cannot create {}", launch.log.display()))?;
        let mut command = match &launch.cpus {
            Some(cpus) => {
                let mut taskset = Command::new("taskset");
                taskset.args(["-c", cpus]).arg(launch.program);
                taskset
            }
            None => Command::new(launch.program),
        };
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("cannot share a log file")?)
            .stderr(log);
        let child = command
            .spawn()
            .with_context(|| format!("{}: cannot run {}", launch.name, launch.program.display()))?;
        let mut component = Self {
            name: launch.name,
            child,
            log: launch.log,
            grace: if launch.probe.is_some() {
                RUNTIME_STOP_GRACE
            } else {
                STOP_GRACE
            },
        };
        match (&launch.probe, launch.listens.first()) {
            (Some(probe), Some(addr)) => component.wait_answering(*addr, probe)?,
            _ => {
                for addr in &launch.listens {
                    component.wait_listening(*addr)?;
                }
            }
        }
        Ok(component)
    }

    /// Waits until `GET probe.path` answers 200.
    fn wait_answering(&mut self, addr: SocketAddr, probe: &Probe) -> anyhow::Result<()> {
        let child = &mut self.child;
        let ready = crate::runtimes::wait_ready(addr, &probe.path, probe.timeout, &mut || {
            matches!(child.try_wait(), Ok(None))
        });
        match ready {
            Ok(_) => Ok(()),
            Err(err) => bail!("{}: {err:#}{}", self.name, self.log_tail()),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn wait_listening(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.exited() {
                bail!(
                    "{} exited ({}) before it listened on {addr}{}",
                    self.name,
                    describe(status),
                    self.log_tail()
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} did not listen on {addr} within {}s{}",
                    self.name,
                    START_TIMEOUT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `Some` once the process has ended.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Fails if the process has ended: a component must live through its rows.
    pub(crate) fn check_alive(&mut self, during: &str) -> anyhow::Result<()> {
        match self.exited() {
            Some(status) => bail!(
                "{} (pid {}) died during {during} ({}){}",
                self.name,
                self.pid(),
                describe(status),
                self.log_tail()
            ),
            None => Ok(()),
        }
    }

    /// The end of its log, for an error message.
    fn log_tail(&self) -> String {
        let Ok(mut file) = File::open(&self.log) else {
            return String::new();
        };
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL)));
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let text = text.trim();
        if text.is_empty() {
            format!("; its log {} is empty", self.log.display())
        } else {
            format!("; the end of its log ({}):\n{text}", self.log.display())
        }
    }

    /// SIGTERM, then SIGKILL after a grace period; reaps the child.
    pub(crate) fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        self.stop();
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// A process's resource use at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    /// User + system CPU seconds since it started.
    pub(crate) cpu_s: f64,
    /// VmHWM: the peak resident set so far, KiB.
    pub(crate) peak_rss_kib: u64,
}

impl Usage {
    /// Zero when /proc cannot say (the process is gone).
    pub(crate) fn of(pid: u32) -> Self {
        let cpu_s = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| cpu_seconds(&stat))
            .unwrap_or(0.0);
        let peak_rss_kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| status_kib(&status, "VmHWM"))
            .unwrap_or(0);
        Self {
            cpu_s,
            peak_rss_kib,
        }
    }
}

/// utime + stime of a /proc/PID/stat line. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks())
}

/// Clock ticks per second (USER_HZ): 100 on every Linux ABI that matters.
fn clock_ticks() -> f64 {
    100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_skip_a_name_with_spaces() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1000 0 0";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(cpu_seconds("garbage"), None);
    }

    #[test]
    fn this_process_has_usage() {
        let usage = Usage::of(std::process::id());
        assert!(usage.peak_rss_kib > 0);
    }

    #[test]
    fn a_component_that_exits_at_once_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("bench-proc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let err = Component::start(Launch {
            name: "failing backend".into(),
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), "echo cannot bind >&2; exit 3".into()],
            env: Vec::new(),
            cpus: None,
            log: dir.join("failing.log"),
            listens: vec![SocketAddr::from(([127, 0, 0, 1], 9))],
            probe: None,
        })
        .expect_err("it exits");
        let message = format!("{err:#}");
        assert!(
            message.contains("failing backend exited (exit status 3)"),
            "{message}"
        );
        assert!(message.contains("cannot bind"), "{message}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
