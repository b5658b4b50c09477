//! Peer programs (HAProxy, nginx) run by tests: found on PATH or in the
//! sbin folders, started on a configuration written to a directory of
//! their own, waited for until they accept, killed on drop. A missing one
//! skips its test through `testkit::skip` (a failure under strict CI,
//! whose `.ci/run` installs them: bench/install-peers.sh).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A program on PATH, else in the sbin folders (not on a user's PATH on Debian).
pub(crate) fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `name`'s program, or `None` after a SKIP line (a panic when required).
pub(crate) fn need(test: &str, name: &str) -> Option<PathBuf> {
    let found = program(name);
    if found.is_none() {
        testkit::skip(
            test,
            testkit::skip::Need::Peer,
            &format!("{name} is not installed (bash bench/install-peers.sh)"),
        );
    }
    found
}

/// A loopback port free a moment ago (the peer binds it next).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A new empty directory for one peer's files.
pub(crate) fn scratch(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sluice-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running peer, killed when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    dir: PathBuf,
}

impl Running {
    /// Starts `program` with `args` in `dir`, and waits until each of
    /// `ports` accepts connections (10 s at most).
    pub(crate) async fn start(program: &Path, args: &[&str], dir: PathBuf, ports: &[u16]) -> Self {
        let child = Command::new(program)
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
        let mut running = Self { child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        for port in ports {
            let addr = SocketAddr::from(([127, 0, 0, 1], *port));
            while tokio::net::TcpStream::connect(addr).await.is_err() {
                if let Ok(Some(status)) = running.child.try_wait() {
                    panic!(
                        "{} exited ({status}): {}",
                        program.display(),
                        running.stderr()
                    );
                }
                assert!(
                    Instant::now() < deadline,
                    "{} never listened on {addr}: {}",
                    program.display(),
                    running.stderr()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        running
    }

    /// What it wrote to standard error so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
