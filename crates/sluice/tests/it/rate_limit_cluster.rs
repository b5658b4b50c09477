//! Three `sluice proxy` processes sharing one `rate_limit` on a real
//! `redis-server` (issue 29): together they let through the limit's rate
//! times the time, plus the burst, within 2%; with Redis stopped the
//! `fail_open` one lets everything through and logs the change once, and
//! once Redis is back it limits again, without a restart. A Redis that
//! wants another password, or that is not Redis at all, is logged as what
//! it is at the first failure (issue 42), and a mended password is
//! picked up again without a restart.

use crate::common;

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use backends::Backend;
use testkit::{serve, RawConn, RedisServer};

/// The shared limit: RATE/s with a burst of BURST.
const RATE: u64 = 100;
const BURST: u64 = 20;
/// Each proxy is offered this much (3 × 70/s: twice the limit).
const EACH_EVERY: Duration = Duration::from_millis(14);
const RUN: Duration = Duration::from_secs(10);

/// A running `sluice proxy`, its address and what it logged.
struct Running {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["proxy", "-c", config.to_str().unwrap()])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sluice proxy");
        let addr = common::first_address(&mut child, "http://");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Self { child, addr, log }
    }

    /// Log lines containing `text`.
    fn logged(&self, text: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(text))
            .count()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_proxies_let_through_the_rate_times_the_time_plus_the_burst() {
    let Some(mut redis) = RedisServer::start("three_proxies_share_a_redis_rate_limit") else {
        return;
    };
    let backend = serve(Backend::Petstore);
    let dir = std::env::temp_dir().join(format!("sluice-rate-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\n\
             upstreams:\n  pets: {{ hosts: [\"http://{}\"] }}\n\
             middleware:\n  shared: {{ rate_limit: {{ rate: {RATE}/s, burst: {BURST}, store: redis, \
             redis: {{ url: \"{}\", timeout: 250ms }} }} }}\n\
             routes:\n  - {{ path: /, chain: [shared], upstream: pets }}\n",
            backend.addr(),
            redis.url()
        ),
    )
    .unwrap();
    let proxies: Vec<Running> = (0..3).map(|_| Running::start(&config)).collect();

    // Each proxy offered 70/s for RUN; every answer is 200 or 429.
    let started = Instant::now();
    let mut loads = Vec::new();
    for proxy in &proxies {
        let addr = proxy.addr;
        loads.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(addr).await;
            let mut tick = tokio::time::interval(EACH_EVERY);
            let (mut allowed, mut limited, mut last_send) = (0u64, 0u64, Instant::now());
            while started.elapsed() < RUN {
                tick.tick().await;
                last_send = Instant::now();
                match conn.get("/v1/pets").await.status {
                    200 => allowed += 1,
                    429 => limited += 1,
                    other => panic!("answered {other}"),
                }
            }
            (allowed, limited, last_send)
        }));
    }
    let (mut allowed, mut limited, mut last_send) = (0, 0, started);
    for load in loads {
        let (a, l, last) = load.await.unwrap();
        allowed += a;
        limited += l;
        last_send = last_send.max(last);
    }
    let elapsed = last_send.duration_since(started).as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let expected = RATE as f64 * elapsed + BURST as f64;
    #[allow(clippy::cast_precision_loss)]
    let error = (allowed as f64 - expected) / expected;
    eprintln!(
        "3 proxies, {RATE}/s burst {BURST}, {elapsed:.3} s: {allowed} allowed, {limited} limited, \
         expected {expected:.1}, error {:+.2}%",
        error * 100.0
    );
    assert!(
        limited > allowed / 2,
        "the offered load was not above the limit"
    );
    assert!(
        error.abs() <= 0.02,
        "{allowed} allowed, expected {expected:.1}"
    );

    // Redis stopped: fail_open lets every request through, logged once.
    redis.stop();
    let mut conn = RawConn::connect(proxies[0].addr).await;
    for _ in 0..50 {
        assert_eq!(conn.get("/v1/pets").await.status, 200);
    }
    assert_eq!(proxies[0].logged("Redis does not answer"), 1);
    // Back: the burst again (Redis lost the counts), then 429.
    redis.resume();
    let deadline = Instant::now() + Duration::from_secs(15);
    while conn.get("/v1/pets").await.status != 429 {
        assert!(
            Instant::now() < deadline,
            "Redis did not limit again within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let answered_again = Instant::now() + Duration::from_secs(5);
    while proxies[0].logged("Redis answers again") == 0 {
        assert!(Instant::now() < answered_again, "no 'answers again' line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(proxies[0].logged("Redis answers again"), 1);
    assert_eq!(proxies[0].logged("Redis does not answer"), 1);
}

/// A `sluice proxy` whose route `/` passes `rate_limit` on Redis with the
/// `redis:` settings `redis` (`fail_open`), to `backend`.
fn limited(dir: &Path, name: &str, backend: SocketAddr, redis: &str) -> Running {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\n\
             upstreams:\n  pets: {{ hosts: [\"http://{backend}\"] }}\n\
             middleware:\n  shared: {{ rate_limit: {{ rate: 10/s, burst: 5, store: redis, redis: {{ {redis} }} }} }}\n\
             routes:\n  - {{ path: /, chain: [shared], upstream: pets }}\n"
        ),
    )
    .unwrap();
    Running::start(&config)
}

impl Running {
    /// The first line with `text`, waited for up to 3 s (the log comes
    /// through a pipe); sends a request every 100 ms meanwhile when `poke`.
    async fn first_line(&self, text: &str, poke: bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut conn = RawConn::connect(self.addr).await;
        loop {
            if let Some(line) = self.log.lock().unwrap().iter().find(|l| l.contains(text)) {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no `{text}` line within 3 s; the log:\n{}",
                self.log.lock().unwrap().join("\n")
            );
            if poke {
                assert_eq!(conn.get("/v1/pets").await.status, 200, "fail_open");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_faults_are_logged_as_what_they_are_at_the_first_failure() {
    let name = "redis_faults_are_logged_as_what_they_are";
    let Some(mut redis) = RedisServer::start_with_password(name, "right-pass") else {
        return;
    };
    let backend = serve(Backend::Petstore);
    let dir = std::env::temp_dir().join(format!("sluice-redis-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = redis.port;

    // A wrong password, with the default 5 ms budget: one request, and
    // the log says why at once (the redis crate's ConnectionManager
    // retried for about 7 s, and three timeouts said "does not answer").
    let wrong = limited(
        &dir,
        "wrong",
        backend.addr(),
        &format!("url: \"redis://:wrong-pass@127.0.0.1:{port}\""),
    );
    let mut conn = RawConn::connect(wrong.addr).await;
    assert_eq!(conn.get("/v1/pets").await.status, 200, "fail_open");
    let line = wrong.first_line("rate_limit:", false).await;
    assert!(line.contains("Redis authentication failed"), "{line}");
    assert_eq!(wrong.logged("does not answer"), 0);
    // The password never reaches the log.
    assert_eq!(wrong.logged("wrong-pass") + wrong.logged("right-pass"), 0);
    // Redis given the proxy's password: the next probe connects again.
    redis.set_password("wrong-pass");
    wrong.first_line("Redis answers again", true).await;
    redis.set_password("right-pass");

    // No password: NOAUTH on the call.
    let none = limited(
        &dir,
        "none",
        backend.addr(),
        &format!("url: \"redis://127.0.0.1:{port}\", timeout: 250ms"),
    );
    let line = none.first_line("rate_limit:", true).await;
    assert!(line.contains("Redis authentication failed"), "{line}");
    assert!(line.contains("NOAUTH"), "{line}");

    // Not a Redis server: an HTTP server's answer is a protocol error.
    let http = limited(
        &dir,
        "http",
        backend.addr(),
        &format!("url: \"redis://{}\", timeout: 250ms", backend.addr()),
    );
    let line = http.first_line("rate_limit:", true).await;
    assert!(line.contains("Redis protocol error"), "{line}");

    // The right password: decisions, and nothing logged.
    let right = limited(
        &dir,
        "right",
        backend.addr(),
        &format!("url: \"redis://:right-pass@127.0.0.1:{port}\", timeout: 250ms"),
    );
    let mut conn = RawConn::connect(right.addr).await;
    let mut limited_count = 0;
    for _ in 0..30 {
        if conn.get("/v1/pets").await.status == 429 {
            limited_count += 1;
        }
    }
    assert!(limited_count > 0, "Redis never limited");
    assert_eq!(right.logged("rate_limit:"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
