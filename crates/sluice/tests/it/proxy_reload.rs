//! Live configuration as an operator meets it (issue 18): `sluice proxy`
//! as a process, reloaded by SIGHUP or by `--watch` seeing a ConfigMap's
//! symlink swap, 20 times under steady load, without a failed request or
//! a leaked file descriptor; SIGHUP to a proxy without TLS listeners; a
//! reload that changes `log.level` and `log.format`.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

const RELOADS: u64 = 20;
const CLIENTS: usize = 8;

/// A keep-alive upstream answering every request with `name`.
fn backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}",
                    name.len()
                );
                while read_head(&mut reader).is_some() {
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Reads a head: its first line and content-length (`None` at EOF or on error).
fn read_head(reader: &mut impl BufRead) -> Option<(String, usize)> {
    let mut first = String::new();
    if reader.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some((first, length));
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
}

/// Sends GET / and reads the answer: status line and body.
fn exchange(stream: &mut TcpStream, reader: &mut impl BufRead) -> Option<(String, Vec<u8>)> {
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: app\r\n\r\n")
        .ok()?;
    let (status, length) = read_head(reader)?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((status, body))
}

/// A ConfigMap as the kubelet writes it: `sluice.yaml -> ..data/sluice.yaml`,
/// `..data -> vN`, swapped by renaming a new symlink over `..data`.
struct ConfigMap {
    dir: PathBuf,
    version: u64,
}

impl ConfigMap {
    fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sluice-reload-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut map = Self { dir, version: 0 };
        map.publish(text);
        std::os::unix::fs::symlink("..data/sluice.yaml", map.file()).unwrap();
        map
    }

    fn file(&self) -> PathBuf {
        self.dir.join("sluice.yaml")
    }

    fn publish(&mut self, text: &str) {
        self.version += 1;
        let version = format!("v{}", self.version);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        std::fs::write(self.dir.join(&version).join("sluice.yaml"), text).unwrap();
        let staged = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("..data")).unwrap();
    }
}

fn config(backend: SocketAddr) -> String {
    format!(
        "workers: 2\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: 127.0.0.1:0 }}\nupstreams:\n  app: {{ hosts: [\"http://{backend}\"] }}\nroutes: [{{ path: /, upstream: app }}]\n"
    )
}

/// `sluice proxy -c FILE ARGS`, its listener and admin addresses.
fn spawn(file: &Path, args: &[&str]) -> (Child, SocketAddr, SocketAddr) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["proxy", "-c", file.to_str().unwrap()])
        .args(args)
        .env("RUST_LOG", "warn");
    spawn_command(command)
}

/// Runs `command` (a `sluice proxy`) until it prints its addresses.
fn spawn_command(mut command: Command) -> (Child, SocketAddr, SocketAddr) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = |prefix: &str, nth: usize| -> SocketAddr {
        line.split_whitespace()
            .filter_map(|w| w.strip_prefix(prefix))
            .nth(nth)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
    };
    (child, addr("http://", 0), addr("http://", 1))
}

fn admin_get(admin: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(admin).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

fn generation(admin: SocketAddr) -> u64 {
    let config: serde_json::Value = serde_json::from_str(&admin_get(admin, "/config")).unwrap();
    config["reload"]["generation"].as_u64().unwrap()
}

fn open_fds(child: &Child) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .count()
}

fn hangup(child: &Child) {
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// What the load saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    first: AtomicU64,
    second: AtomicU64,
}

/// `CLIENTS` keep-alive clients sending GET / until `stop`.
fn load(
    proxy: SocketAddr,
    stop: &Arc<AtomicBool>,
    tally: &Arc<Tally>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|_| {
            let (stop, tally) = (Arc::clone(stop), Arc::clone(tally));
            std::thread::spawn(move || {
                let stream = TcpStream::connect(proxy).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                while !stop.load(Ordering::Relaxed) {
                    match exchange(&mut stream, &mut reader) {
                        Some((status, body)) if status.starts_with("HTTP/1.1 200") => {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                            match body.as_slice() {
                                b"first" => tally.first.fetch_add(1, Ordering::Relaxed),
                                _ => tally.second.fetch_add(1, Ordering::Relaxed),
                            };
                        }
                        _ => {
                            tally.failed.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Polls `state` every 20 ms; fails naming `what` after 10 s.
fn wait_for(what: &str, mut state: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

enum Trigger {
    Hangup,
    Watch,
}

fn reloads_under_load(trigger: Trigger) {
    let (first, second) = (backend("first"), backend("second"));
    let name = match trigger {
        Trigger::Hangup => "hup",
        Trigger::Watch => "watch",
    };
    let mut map = ConfigMap::new(name, &config(first));
    let args: &[&str] = match trigger {
        Trigger::Hangup => &[],
        Trigger::Watch => &["--watch"],
    };
    let (mut child, proxy, admin) = spawn(&map.file(), args);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let clients = load(proxy, &stop, &tally);
    // Every client connected and answered (with the upstream connections
    // that takes) before the descriptors are counted.
    wait_for("the first answers", || {
        tally.ok.load(Ordering::Relaxed) >= 10 * CLIENTS as u64
    });
    let baseline = open_fds(&child);
    for reload in 1..=RELOADS {
        let (target, answers) = if reload % 2 == 1 {
            (second, &tally.second)
        } else {
            (first, &tally.first)
        };
        let before = answers.load(Ordering::Relaxed);
        map.publish(&config(target));
        if let Trigger::Hangup = trigger {
            hangup(&child);
        }
        wait_for(&format!("reload {reload}"), || generation(admin) >= reload);
        // The load moves to the new host before the next reload.
        wait_for(&format!("answers after reload {reload}"), || {
            answers.load(Ordering::Relaxed) > before + CLIENTS as u64
        });
    }
    // Each reload retires the host the last one used: a leak would add
    // its connections every time. Retired connections close as their
    // requests end, so the count is polled down to its bound.
    let bound = baseline + 4;
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let now = open_fds(&child);
        if now <= bound || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ok = tally.ok.load(Ordering::Relaxed);
    assert_eq!(tally.failed.load(Ordering::Relaxed), 0, "failed requests");
    assert!(tally.first.load(Ordering::Relaxed) > 0 && tally.second.load(Ordering::Relaxed) > 0);
    assert!(
        after <= bound,
        "fds: {baseline} under load before, {after} after {RELOADS} reloads"
    );
    let metrics = admin_get(admin, "/metrics");
    assert!(metrics.contains(&format!(
        "sluice_config_reloads_total{{result=\"success\"}} {RELOADS}"
    )));
    assert!(child.try_wait().unwrap().is_none());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&map.dir);
    eprintln!("{name}: {ok} requests in {elapsed:.1} s, fds {baseline} -> {after}");
}

#[test]
fn sighup_reloads_under_load_without_a_failed_request() {
    reloads_under_load(Trigger::Hangup);
}

#[test]
fn watch_sees_a_configmap_swap_under_load_without_a_failed_request() {
    reloads_under_load(Trigger::Watch);
}

#[test]
fn sighup_without_tls_listeners_keeps_the_proxy_serving() {
    let upstream = backend("first");
    let map = ConfigMap::new("hup-plain", &config(upstream));
    let (mut child, proxy, admin) = spawn(&map.file(), &[]);
    hangup(&child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while generation(admin) < 1 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGHUP ended the proxy"
        );
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stream = TcpStream::connect(proxy).unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("first"),
        "{text}"
    );
    assert!(child.try_wait().unwrap().is_none());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&map.dir);
}

/// The lines the proxy writes to stderr, as they come.
fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (lines, received) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    received
}

/// The next line holding `text`.
fn wait_for_line(lines: &std::sync::mpsc::Receiver<String>, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {text:?}"));
        if line.contains(text) {
            return line;
        }
    }
}

#[test]
fn a_reload_changes_the_log_level_and_format() {
    let upstream = backend("first");
    let with_log = |log: &str| format!("{}log: {log}\n", config(upstream));
    let mut map = ConfigMap::new("log", &with_log("{ level: warn }"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["proxy", "-c", map.file().to_str().unwrap()])
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped());
    let (mut child, _, admin) = spawn_command(command);
    let lines = stderr_lines(&mut child);

    // info and JSON: the reload's own line says so.
    map.publish(&with_log("{ level: info, format: json }"));
    hangup(&child);
    let line = wait_for_line(&lines, "configuration reloaded");
    let json: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"));
    assert_eq!(json["level"], "INFO", "{line}");
    assert_eq!(generation(admin), 1);

    // Back to warn: this reload is not logged ...
    map.publish(&with_log("{ level: warn, format: json }"));
    hangup(&child);
    wait_for("the second reload", || generation(admin) >= 2);
    // ... so the next one, at info in text, is the next line that says so.
    map.publish(&with_log("{ level: info, format: text }"));
    hangup(&child);
    let line = wait_for_line(&lines, "configuration reloaded");
    assert!(
        line.contains("INFO") && line.contains("generation") && !line.starts_with('{'),
        "logged at level warn, or not in text: {line}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&map.dir);
}
