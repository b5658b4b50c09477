//! A real `redis-server` (Debian's `redis-server` package) on free
//! loopback ports, for the tests of `rate_limit` with `store: redis`:
//! started, stopped and started again on the same ports, paused
//! (SIGSTOP) and let go on, killed on drop;
//! with a password (`--requirepass`) when asked.
//!
//! Without `redis-server` on PATH, [`RedisServer::start`] returns `None`
//! after printing a `SKIP` line that names the test, unless
//! `SLUICE_REQUIRE_REDIS=1` (set by `.ci/run`): then it panics, so that CI
//! cannot pass by skipping.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::TestCerts;

/// How long a started server has to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    /// The TLS port, when started with [`RedisServer::start_tls`].
    pub tls_port: Option<u16>,
    args: Vec<String>,
    /// `--requirepass`, which [`RedisServer::command`] authenticates with.
    password: Option<String>,
}

impl RedisServer {
    /// A plaintext server, or `None` (with a `SKIP` line for `test`) when
    /// `redis-server` is not installed.
    pub fn start(test: &str) -> Option<Self> {
        Self::start_with(test, None, None)
    }

    /// A server with a TLS port too, its certificate from `certs`
    /// (no client certificate asked for).
    pub fn start_tls(test: &str, certs: &TestCerts) -> Option<Self> {
        Self::start_with(test, Some(certs), None)
    }

    /// A plaintext server that wants `password` (`--requirepass`): a
    /// client without it gets NOAUTH, one with another WRONGPASS.
    pub fn start_with_password(test: &str, password: &str) -> Option<Self> {
        Self::start_with(test, None, Some(password))
    }

    /// Changes the password the running server wants (`CONFIG SET
    /// requirepass`), and the one it is started again with.
    pub fn set_password(&mut self, password: &str) {
        let reply = self.command(&["CONFIG", "SET", "requirepass", password]);
        assert!(reply.starts_with("+OK"), "CONFIG SET requirepass: {reply}");
        if let Some(at) = self.args.iter().position(|a| a == "--requirepass") {
            self.args[at + 1] = password.into();
        }
        self.password = Some(password.into());
    }

    fn start_with(test: &str, certs: Option<&TestCerts>, password: Option<&str>) -> Option<Self> {
        if !installed() {
            crate::skip(
                test,
                crate::Need::Redis,
                "redis-server is not installed (apt-get install redis-server)",
            );
            return None;
        }
        let port = free_port();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--loglevel",
            "warning",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let tls_port = certs.map(|certs| {
            let tls_port = free_port();
            let path = |p: &PathBuf| p.display().to_string();
            args.extend([
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                path(&certs.cert_path),
                "--tls-key-file".into(),
                path(&certs.key_path),
                "--tls-ca-cert-file".into(),
                path(&certs.ca_path),
                "--tls-auth-clients".into(),
                "no".into(),
            ]);
            tls_port
        });
        if let Some(password) = password {
            args.extend(["--requirepass".into(), password.into()]);
        }
        let mut server = Self {
            child: None,
            port,
            tls_port,
            args,
            password: password.map(str::to_string),
        };
        server.resume();
        Some(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `rediss://localhost:TLS_PORT` (the name the test certificate has).
    pub fn tls_url(&self) -> String {
        format!(
            "rediss://localhost:{}",
            self.tls_port.expect("started with start_tls")
        )
    }

    /// Kills the server (its data goes with it: nothing is saved).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server's process (SIGSTOP) without closing anything: its
    /// connections stay open and nothing is answered, as with a Redis
    /// that stalls (a long command, swapping, a paused VM).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn unpause(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let child = self.child.as_ref().expect("the server is running");
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {}", child.id());
    }

    /// Starts it again on the same ports and waits until it answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = Command::new("redis-server")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + READY_WITHIN;
        while !pong(addr) {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING on {addr} within {READY_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs one command (`redis-cli`-style words), after `AUTH` when the
    /// server has a password, and returns the reply's raw text.
    pub fn command(&self, words: &[&str]) -> String {
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis-server");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("a read timeout");
        if let Some(password) = &self.password {
            let reply = exchange(&mut stream, &["AUTH", password]);
            assert!(reply.starts_with("+OK"), "AUTH: {reply}");
        }
        exchange(&mut stream, words)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One command and its reply's raw text.
fn exchange(stream: &mut TcpStream, words: &[&str]) -> String {
    let mut request = format!("*{}\r\n", words.len());
    for word in words {
        request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    stream.write_all(request.as_bytes()).expect("send");
    let mut reply = vec![0; 4096];
    let n = stream.read(&mut reply).expect("a reply");
    String::from_utf8_lossy(&reply[..n]).into_owned()
}

fn installed() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A port nothing listens on now (the OS picks it; another process could
/// take it before redis-server binds it, which the readiness wait shows).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn pong(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0; 16];
    // A server with a password answers NOAUTH: it is up all the same.
    stream.write_all(b"PING\r\n").is_ok()
        && stream
            .read(&mut reply)
            .is_ok_and(|n| reply[..n].starts_with(b"+PONG") || reply[..n].starts_with(b"-NOAUTH"))
}
