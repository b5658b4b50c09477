//! Every seed backend in its own runtime answers, for each endpoint it
//! shares with `sluice serve`, the same status, content type, body (and
//! Location) as sluice's backend does in this process.
//!
//! Each runtime is built on first use into ~/.cache/sluice/runtimes (see
//! bench::runtimes) and started on a free loopback port. `cargo test` checks
//! go-http, node and spring-mvc; webflux, grizzly and payara are
//! `#[ignore]`d (listed as ignored by the runner, with the reason) and run
//! with `-- --include-ignored` (bench/runtimes/check.sh does). A runtime
//! whose toolchain is missing is skipped through testkit::skip: a SKIP line,
//! or a failure under SLUICE_STRICT=1. A first spring-mvc build downloads
//! from Maven Central (about 20 s here); from the cache it only starts
//! (about 8 s).

use std::{
    fs::File,
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use bench::runtimes::{
    default_cache_dir, prepare, wait_ready, BuildEvent, Built, Outcome, Runtime, Service,
    Toolchains, HELLO_SIZE,
};
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use testkit::{
    serve_with, test_options, Backend, Need, RawConn, RawResponse, ServeOptions, TestServer,
};

/// How long a runtime gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[test]
fn go_http_answers_as_sluice_serve() {
    check(Runtime::GoHttp);
}

#[test]
fn node_answers_as_sluice_serve() {
    check(Runtime::Node);
}

#[test]
fn spring_mvc_answers_as_sluice_serve() {
    check(Runtime::SpringMvc);
}

#[test]
#[ignore = "three more JVM builds and starts (minutes on a cold cache); bench/runtimes/check.sh runs them"]
fn webflux_answers_as_sluice_serve() {
    check(Runtime::Webflux);
}

#[test]
#[ignore = "three more JVM builds and starts (minutes on a cold cache); bench/runtimes/check.sh runs them"]
fn grizzly_answers_as_sluice_serve() {
    check(Runtime::Grizzly);
}

#[test]
#[ignore = "three more JVM builds and starts (minutes on a cold cache); bench/runtimes/check.sh runs them"]
fn payara_answers_as_sluice_serve() {
    check(Runtime::Payara);
}

/// Builds (or finds) the runtime, starts it and sluice's backends, and
/// compares every shared endpoint.
fn check(runtime: Runtime) {
    let started = Instant::now();
    let toolchains = Toolchains::detect();
    let detected = started.elapsed();
    let built = match prepare(runtime, &toolchains, &default_cache_dir(), &mut report) {
        Ok(Outcome::Ready(built)) => built,
        Ok(Outcome::Skipped(note)) => {
            let test = format!(
                "{}_answers_as_sluice_serve",
                runtime.name().replace('-', "_")
            );
            return testkit::skip(&test, Need::Toolchain, &note);
        }
        Err(err) => panic!("{err:#}"),
    };
    println!(
        "{runtime}: {} on {}, in {} (toolchains found in {} ms, prepared in {} ms)",
        built.framework,
        built.runtime_version,
        built.dir.display(),
        detected.as_millis(),
        (started.elapsed() - detected).as_millis()
    );
    // The passthrough's downstream: sluice's, shared by both sides.
    let downstream = testkit::serve(Backend::Downstream);
    let process = RuntimeProcess::start(&built, &downstream.url(""));
    let compare = Comparison {
        runtime,
        addr: process.addr,
    };
    for service in runtime.services() {
        match service {
            Service::Hello => compare.hello(),
            Service::Petstore => compare.petstore(),
            Service::Customers => compare.customers(),
            Service::Passthrough => compare.passthrough(&downstream),
        }
    }
}

fn report(event: BuildEvent<'_>) {
    match event {
        BuildEvent::Cached { runtime, dir } => println!("{runtime}: cached in {}", dir.display()),
        BuildEvent::Started {
            runtime, command, ..
        } => println!("{runtime}: building: {command}"),
        BuildEvent::Output { .. } => {}
        BuildEvent::Finished { runtime, elapsed } => {
            println!("{runtime}: built in {:.1}s", elapsed.as_secs_f64())
        }
    }
}

/// A runtime serving on a free loopback port; stopped when dropped.
struct RuntimeProcess {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl RuntimeProcess {
    fn start(built: &Built, downstream: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let command = built.command(port, Some(downstream));
        let log_path = std::env::temp_dir().join(format!(
            "bench-runtime-{}-{}.log",
            built.runtime,
            std::process::id()
        ));
        let log = File::create(&log_path).expect("runtime log");
        let child = command
            .to_command()
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {command}: {err}"));
        let mut process = Self {
            child,
            addr,
            log: log_path.clone(),
        };
        let runtime = built.runtime;
        let ready = wait_ready(
            addr,
            runtime.ready_path(),
            runtime.start_timeout(),
            &mut || matches!(process.child.try_wait(), Ok(None)),
        );
        match ready {
            Ok(took) => println!("{runtime}: serving after {:.1}s", took.as_secs_f64()),
            Err(err) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail = &log[log.len().saturating_sub(3000)..];
                panic!("{runtime} ({command}): {err:#}; its log ends:\n{tail}");
            }
        }
        process
    }
}

impl Drop for RuntimeProcess {
    /// SIGTERM first: Payara Micro removes its temporary folder only then.
    /// The log is kept when the test failed.
    fn drop(&mut self) {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

struct Comparison {
    runtime: Runtime,
    addr: SocketAddr,
}

impl Comparison {
    fn hello(&self) {
        let sluice = serve_with(
            Backend::Static,
            ServeOptions {
                static_size: HELLO_SIZE,
                ..test_options()
            },
        );
        self.same(&sluice, "GET", "/", None, b"", Exact);
    }

    fn petstore(&self) {
        let sluice = testkit::serve(Backend::Petstore);
        self.same(&sluice, "GET", "/v1/pets", None, b"", Exact);
    }

    /// Both registries start fresh, so that the same requests in the same
    /// order must meet the same answers.
    fn customers(&self) {
        let sluice = testkit::serve(Backend::Customers);
        let json = Some("application/json");
        let long = "é".repeat(256);
        let too_long = "é".repeat(257);
        let valid_long = format!(r#"{{"id":13,"name":"{long}","email":"a@b"}}"#);
        let invalid_long = format!(r#"{{"id":14,"name":"{too_long}","email":"a@b"}}"#);
        let posts: [(&str, Option<&str>, &[u8], Match); 12] = [
            (
                "register",
                json,
                br#"{"id":11,"name":"Eleven","email":"eleven@example.com"}"#,
                Exact,
            ),
            (
                "duplicate",
                json,
                br#"{"id":11,"name":"Again","email":"again@example.com"}"#,
                Exact,
            ),
            (
                "invalid fields",
                json,
                br#"{"id":-1,"name":"","email":"nope"}"#,
                Exact,
            ),
            ("missing fields", json, b"{}", Exact),
            ("not an object", json, b"[1]", Exact),
            (
                "nulls and floats",
                json,
                br#"{"id":1.5,"name":null,"email":"@b"}"#,
                Exact,
            ),
            (
                "escapes and unicode",
                json,
                r#"{"id":12,"name":"Zoë \"Z\" \\ 東京","email":"z@b","extra":[1]}"#.as_bytes(),
                Exact,
            ),
            ("256 characters", json, valid_long.as_bytes(), Exact),
            ("257 characters", json, invalid_long.as_bytes(), Exact),
            (
                "not JSON media type",
                Some("text/plain"),
                br#"{"id":20,"name":"n","email":"a@b"}"#,
                Exact,
            ),
            (
                "problem+json is JSON",
                Some("application/problem+json; charset=utf-8"),
                br#"{"id":21,"name":"n","email":"a@b"}"#,
                Exact,
            ),
            // The detail quotes each parser's own message.
            ("malformed", json, br#"{"id":1,"#, StatusAndType),
        ];
        self.same(&sluice, "GET", "/customers", None, b"", Exact);
        for (case, content_type, body, matching) in posts {
            println!("{}: POST /customers ({case})", self.runtime);
            self.same(&sluice, "POST", "/customers", content_type, body, matching);
        }
        self.same(&sluice, "GET", "/customers", None, b"", Exact);
    }

    fn passthrough(&self, downstream: &TestServer) {
        let sluice = serve_with(
            Backend::Passthrough,
            ServeOptions {
                downstream: downstream.url("").parse().expect("downstream URL"),
                ..test_options()
            },
        );
        let json = Some("application/json");
        let path = "/passthrough/message";
        let message = br#"{"id":"1","payload":"sample payload","delay":20}"#;
        self.same(&sluice, "POST", path, json, message, Exact);
        self.same(&sluice, "POST", path, json, br#"{"id":7}"#, Exact);
        // The downstream refuses a message without an id: its 400 is relayed.
        self.same(&sluice, "POST", path, json, br#"{"delay":0}"#, Exact);
        self.same(&sluice, "POST", path, Some("text/plain"), b"{}", Exact);
        self.same(&sluice, "POST", path, json, b"{", StatusAndType);
    }

    /// Sends the same request to both and compares the answers.
    fn same(
        &self,
        sluice: &TestServer,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
        matching: Match,
    ) {
        let expected = request(sluice.addr(), method, path, content_type, body);
        let actual = request(self.addr, method, path, content_type, body);
        let what = format!(
            "{} {method} {path} {}",
            self.runtime,
            String::from_utf8_lossy(body)
        );
        assert_eq!(actual.status, expected.status, "status of {what}");
        assert_eq!(
            actual.header("content-type"),
            expected.header("content-type"),
            "content type of {what}"
        );
        assert_eq!(
            actual.header("location"),
            expected.header("location"),
            "location of {what}"
        );
        match matching {
            Exact => assert_eq!(
                actual.text(),
                expected.text(),
                "body of {what}: runtime first, sluice second"
            ),
            StatusAndType => assert_eq!(
                actual.json()["title"],
                expected.json()["title"],
                "problem title of {what}"
            ),
        }
        println!(
            "{}: {method} {path}: {} {} {} bytes, as sluice serve",
            self.runtime,
            expected.status,
            expected.header("content-type").unwrap_or("-"),
            expected.body.len()
        );
    }
}

/// How much of an answer must match.
#[derive(Debug, Clone, Copy)]
enum Match {
    Exact,
    /// Status, content type and the problem's title; the detail may differ.
    StatusAndType,
}
use Match::{Exact, StatusAndType};

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> RawResponse {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime");
    runtime.block_on(async {
        let mut conn = RawConn::connect(addr).await;
        let header = content_type.map(|value| format!("Content-Type: {value}"));
        let headers: Vec<&str> = header.iter().map(String::as_str).collect();
        tokio::time::timeout(
            Duration::from_secs(15),
            conn.request(method, path, &headers, body),
        )
        .await
        .unwrap_or_else(|_| panic!("{method} {path} on {addr}: no answer in 15 s"))
    })
}
