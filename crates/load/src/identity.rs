//! What test a log belongs to, so that `sluice load merge` adds up only
//! the parts of one test, each once. Every log says (on its
//! `#sluice-test` line, written when the run starts):
//!
//! - the test's settings as every shard was given them, before the split
//!   (`-c`, `-n` and `--rate` count the whole test; `-t` is per process
//!   and left out), the shard count and `--start-at`: the same on every
//!   shard of one test, however they were started;
//! - the test's id: `--test-id`, else a digest of those settings, so that
//!   shards started apart on many machines agree on it without talking to
//!   each other;
//! - which shard this process ran, and `run`: a random id of this
//!   process, so that the same log given twice (or a copy of it) is told
//!   from two runs of one shard.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{config::LoadConfig, shard::unix_seconds, Protocol, Shard};

/// The longest `--test-id`.
const MAX_TEST_ID: usize = 128;

/// A log's test and run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestIdentity {
    pub(crate) test_id: String,
    pub(crate) settings: TestSettings,
    pub(crate) shard: Shard,
    /// This process's run: random, one per log.
    pub(crate) run: String,
}

/// The whole test's settings, the same on each of its shards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestSettings {
    /// `METHOD URL` of each request.
    pub(crate) requests: Vec<String>,
    pub(crate) protocol: Protocol,
    /// SHA-256 of the headers and the body: the same requests, without
    /// writing a token or a password into the log.
    pub(crate) headers_and_body: String,
    pub(crate) connections: usize,
    pub(crate) total_requests: Option<u64>,
    pub(crate) rate: Option<f64>,
    /// `None` with `-n`.
    pub(crate) duration_s: Option<f64>,
    pub(crate) warmup_s: f64,
    pub(crate) timeout_ms: u64,
    pub(crate) pipeline: usize,
    pub(crate) streams: usize,
    pub(crate) think_ms: Option<[u64; 2]>,
    pub(crate) ramp_s: f64,
    pub(crate) shards: u32,
    /// `--start-at`, in unix seconds.
    pub(crate) start_at: Option<f64>,
}

impl TestIdentity {
    /// The identity of a run of `config`, with a new random `run`.
    pub(crate) fn new(config: &LoadConfig) -> Self {
        let mut request = Vec::new();
        for (name, value) in &config.headers {
            request.extend_from_slice(name.as_str().as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"\r\n");
        request.extend_from_slice(&config.body);
        let settings = TestSettings {
            requests: config
                .requests
                .iter()
                .map(|r| format!("{} {}", r.method, r.url))
                .collect(),
            protocol: config.protocol,
            headers_and_body: sha256_hex(&request),
            connections: config.connections,
            total_requests: config.total_requests,
            rate: config.rate,
            duration_s: config
                .total_requests
                .is_none()
                .then_some(config.duration.as_secs_f64()),
            warmup_s: config.warmup.as_secs_f64(),
            timeout_ms: config.timeout.as_millis() as u64,
            pipeline: config.pipeline,
            streams: config.streams,
            think_ms: config
                .think
                .map(|t| [t.min.as_millis() as u64, t.max.as_millis() as u64]),
            ramp_s: config.ramp.as_secs_f64(),
            shards: config.shard.count,
            start_at: config.start_at.map(unix_seconds),
        };
        let test_id = config.test_id.clone().unwrap_or_else(|| {
            let json = serde_json::to_vec(&settings).unwrap_or_default();
            sha256_hex(&json)[..16].to_string()
        });
        Self {
            test_id,
            settings,
            shard: config.shard,
            run: format!("{:016x}", fastrand::u64(..)),
        }
    }

    /// Why a log of `other` is not another part of the test of `self`, if
    /// it is not: `ours` and `theirs` name the two logs.
    pub(crate) fn mismatch(&self, other: &Self, ours: &str, theirs: &str) -> Option<String> {
        if self.run == other.run {
            return Some(format!(
                "{theirs} and {ours} are the same log (run {}): given twice, its requests would count twice",
                self.run
            ));
        }
        if let Some((key, mine, yours)) = first_difference(&self.settings, &other.settings) {
            return Some(format!(
                "{theirs} and {ours} are logs of different tests: {theirs} has {} {yours}, {ours} has {mine}",
                flag(&key)
            ));
        }
        if self.test_id != other.test_id {
            return Some(format!(
                "{theirs} and {ours} are logs of different tests: {theirs} has --test-id {}, {ours} has {}",
                other.test_id, self.test_id
            ));
        }
        if self.shard == other.shard {
            let shard = self.shard;
            return Some(format!(
                "{theirs} and {ours} are two runs of shard {shard} of test {}: its requests would count twice",
                self.test_id
            ));
        }
        None
    }
}

/// Checks a `--test-id`: printable, no spaces, at most 128 bytes.
pub(crate) fn check_test_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_TEST_ID || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--test-id `{id}`: 1 to {MAX_TEST_ID} printable characters without spaces"
        ));
    }
    Ok(())
}

/// The first setting (by name) that differs, with the two values as JSON.
fn first_difference(
    ours: &TestSettings,
    theirs: &TestSettings,
) -> Option<(String, String, String)> {
    let (Ok(Value::Object(ours)), Ok(Value::Object(theirs))) =
        (serde_json::to_value(ours), serde_json::to_value(theirs))
    else {
        return Some(("settings".into(), "?".into(), "?".into()));
    };
    ours.iter().find_map(|(key, mine)| {
        let yours = theirs.get(key).unwrap_or(&Value::Null);
        (mine != yours).then(|| (key.clone(), mine.to_string(), yours.to_string()))
    })
}

/// How a user names a setting: its flag.
fn flag(key: &str) -> String {
    let flag = match key {
        "requests" => "URLs (and -X)",
        "protocol" => "protocol (--h2, --h3)",
        "headers_and_body" => "headers and body (-H, --body; SHA-256)",
        "connections" => "-c/-u",
        "total_requests" => "-n",
        "rate" => "--rate",
        "duration_s" => "-d (s)",
        "warmup_s" => "--warmup (s)",
        "timeout_ms" => "--timeout (ms)",
        "pipeline" => "--pipeline",
        "streams" => "-m",
        "think_ms" => "--think (ms)",
        "ramp_s" => "--ramp (s)",
        "shards" => "a shard count",
        "start_at" => "--start-at (unix s)",
        other => other,
    };
    flag.to_string()
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use http::Method;

    use super::*;

    fn config(n: u64, shard: Shard) -> LoadConfig {
        let url = [(Method::GET, "http://127.0.0.1:1/x".to_string())];
        let mut config = LoadConfig::new(&url).expect("valid");
        config.total_requests = Some(n);
        config.shard = shard;
        config
    }

    #[test]
    fn shards_of_one_test_agree_and_everything_else_differs() {
        let (a, b) = (Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap());
        let first = TestIdentity::new(&config(200, a));
        let second = TestIdentity::new(&config(200, b));
        assert_eq!(first.test_id, second.test_id);
        assert_eq!(first.mismatch(&second, "a", "b"), None);
        // Threads are per process: not the test's.
        let mut more_threads = config(200, b);
        more_threads.threads = 4;
        assert_eq!(
            first.mismatch(&TestIdentity::new(&more_threads), "a", "b"),
            None
        );

        let why = first
            .mismatch(&TestIdentity::new(&config(4000, b)), "a", "b")
            .unwrap();
        assert_eq!(
            why,
            "b and a are logs of different tests: b has -n 4000, a has 200"
        );
        let why = first.mismatch(&first.clone(), "a", "b").unwrap();
        assert!(why.contains("same log"), "{why}");
        let why = first
            .mismatch(&TestIdentity::new(&config(200, a)), "a", "b")
            .unwrap();
        assert!(why.contains("two runs of shard 0/2"), "{why}");

        let mut later = config(200, b);
        later.start_at = Some(UNIX_EPOCH + Duration::from_secs(1_748_779_200));
        let why = first
            .mismatch(&TestIdentity::new(&later), "a", "b")
            .unwrap();
        assert!(why.contains("--start-at"), "{why}");
        let mut named = config(200, b);
        named.test_id = Some("nightly-7".into());
        let why = first
            .mismatch(&TestIdentity::new(&named), "a", "b")
            .unwrap();
        assert!(why.contains("nightly-7"), "{why}");
        // A header's value is not written, only its digest.
        let mut secret = config(200, b);
        secret.headers.push((
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer s3cret"),
        ));
        let identity = TestIdentity::new(&secret);
        assert!(!serde_json::to_string(&identity).unwrap().contains("s3cret"));
        assert!(first.mismatch(&identity, "a", "b").unwrap().contains("-H"));
    }

    #[test]
    fn test_ids_are_checked() {
        assert!(check_test_id("run-2025-06-01").is_ok());
        for bad in ["", "a b", &"x".repeat(129), "é"] {
            assert!(check_test_id(bad).is_err(), "{bad:?}");
        }
    }
}
