#!/usr/bin/env python3
"""Hand-picked mutations (docs/TESTING.md): each one changes a line of the
source the way a plausible bug would, runs the tests that should catch
it, and puts the line back. A mutation that the tests survive is a gap.

Not part of CI (each mutation rebuilds the crate it touches and its
test binary: minutes each). Run from the repository root:

    python3 .ci/mutations.py            # all of them
    python3 .ci/mutations.py NAME ...   # some
    python3 .ci/mutations.py --list

It prints one line per mutation, `killed` or `SURVIVED`, with the test
command; the source is restored even when interrupted.
"""

import os
import subprocess
import sys
import time

# (name, [(file, the text replaced (found exactly once), its replacement),
#  ...], cargo test arguments that must fail with the change)
MUTATIONS = [
    (
        "listener-ignores-client-ca",
        [
            (
                "crates/proxy/src/server/listener.rs",
                "            client_ca: settings\n                .client_ca\n                .as_ref()\n                .map(|ca| PathBuf::from(&ca.value)),",
                "            client_ca: None,",
            ),
        ],
        ["-p", "proxy", "--test", "it", "mtls::a_client_ca"],
    ),
    (
        "upstream-ignores-client-certificate",
        [
            (
                "crates/proxy/src/upstream/mod.rs",
                "    let identity = match (&settings.cert, &settings.key) {",
                "    let identity: Option<tls::Identity<'_>> = None;\n    let _ = match (&settings.cert, &settings.key) {",
            ),
        ],
        ["-p", "proxy", "--test", "it", "mtls::an_upstream"],
    ),
    (
        "h3-client-reset-ends-the-upstream-body-then-resets",
        [
            (
                "crates/proxy/src/server/h3/stream.rs",
                "            Ok(Some(Event::Head(_))) => unreachable_head(&mut upstream),\n            Err(err) => {\n                upstream.send_reset(Reason::CANCEL);",
                "            Ok(Some(Event::Head(_))) => unreachable_head(&mut upstream),\n            Err(err) => {\n                let _ = send_data(&mut upstream, Bytes::new(), true, None).await;",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::requests"],
    ),
    (
        "h2-client-reset-ends-the-h2-upstream-body-then-resets",
        [
            (
                "crates/proxy/src/session/h2/pump_h2.rs",
                "        let data = data.map_err(|_| {\n            upstream.send_reset(Reason::CANCEL);\n            PumpError::Client\n        })?;",
                "        let Ok(data) = data else {\n            let _ = send_data(&mut upstream, Bytes::new(), true, None).await;\n            return Ok(());\n        };",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::requests::a_body_the_client_breaks_off_resets"],
    ),
    (
        "h3-client-reset-passed-on-as-the-end",
        [
            (
                "crates/proxy/src/server/h3/stream.rs",
                "            Ok(Some(Event::Head(_))) => unreachable_head(&mut upstream),\n            Err(err) => {\n                upstream.send_reset(Reason::CANCEL);\n                return Err(err);",
                "            Ok(Some(Event::Head(_))) => unreachable_head(&mut upstream),\n            Err(_) => {\n                let _ = send_data(&mut upstream, Bytes::new(), true, None).await;\n                return Ok(());",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::requests"],
    ),
    (
        "h2-client-reset-unheard-and-passed-on-as-the-end",
        [
            (
                "crates/proxy/src/session/h2/pump_h2.rs",
                "        let data = data.map_err(|_| {\n            upstream.send_reset(Reason::CANCEL);\n            PumpError::Client\n        })?;",
                "        let Ok(data) = data else {\n            let _ = send_data(&mut upstream, Bytes::new(), true, None).await;\n            return Ok(());\n        };",
            ),
            (
                "crates/proxy/src/session/h2/to_h2.rs",
                "            respond.poll_client_reset(cx).map(|()| None)",
                "            let _ = respond;\n            Poll::Pending",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::requests::a_body_the_client_breaks_off_resets"],
    ),
    (
        "h2-client-reset-ends-the-h1-upstream-body",
        [
            (
                "crates/proxy/src/session/h2/pump_h1.rs",
                "                Turn::Data(Some(Err(_))) | Turn::Trailers(Err(_)) => return Err(PumpStop::Client),",
                "                Turn::Data(Some(Err(_))) | Turn::Trailers(Err(_)) if self.chunked => {\n                    encode_last_chunk(&mut self.out, std::iter::empty::<(&[u8], &[u8])>());\n                    self.end();\n                }\n                Turn::Data(Some(Err(_))) | Turn::Trailers(Err(_)) => return Err(PumpStop::Client),",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::requests::a_body_the_client_breaks_off_never"],
    ),
    (
        "h1-upstream-eof-ends-the-h1-response",
        [
            (
                "crates/proxy/src/session/h1/relay_h1.rs",
                "                UpstreamRead::Done(Ok(0)) if from == BodyFraming::UntilClose => {",
                "                UpstreamRead::Done(Ok(0)) => {",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::responses"],
    ),
    (
        "h1-upstream-eof-ends-the-h2-response",
        [
            (
                "crates/proxy/src/session/h2/to_h1.rs",
                "            Ok(0) if framing == BodyFraming::UntilClose => {",
                "            Ok(0) => {",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::responses"],
    ),
    (
        "h2-upstream-reset-ends-the-h2-response",
        [
            (
                "crates/proxy/src/session/h2/to_h2.rs",
                "        client.send_reset(Reason::INTERNAL_ERROR);\n        (bytes, Some(RelayStop::Upstream(what)))",
                "        let _ = client.send_data(Bytes::new(), true);\n        (bytes, Some(RelayStop::Upstream(what)))",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::responses"],
    ),
    (
        "h2-upstream-reset-keeps-the-h1-client-connection",
        [
            (
                "crates/proxy/src/session/h1/relay_h2.rs",
                'closing the client connection");\n        false\n    }',
                'closing the client connection");\n        true\n    }',
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::responses"],
    ),
    (
        "h3-broken-response-finished",
        [
            (
                "crates/proxy/src/server/h3/stream.rs",
                "        // Dropping `body` resets the HTTP/2 stream: the upstream work stops.\n        return cancelled(writer);",
                "        writer.finish();\n        return true;",
            ),
        ],
        ["-p", "proxy", "--test", "it", "truncated::responses"],
    ),
    (
        "redis-call-timeout-lets-through",
        [
            (
                "crates/proxy/src/middleware/rate_limit_redis/mod.rs",
                "            Err(_) => {\n                self.failed(Cause::Timeout, &NO_ANSWER);\n                self.fallback()\n            }",
                "            Err(_) => {\n                self.failed(Cause::Timeout, &NO_ANSWER);\n                Flow::Next\n            }",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis_stall"],
    ),
    (
        "redis-connect-timeout-lets-through",
        [
            (
                "crates/proxy/src/middleware/rate_limit_redis/mod.rs",
                "            Got::TimedOut => {\n                self.failed(Cause::Timeout, &NO_ANSWER);\n                return self.fallback();",
                "            Got::TimedOut => {\n                self.failed(Cause::Timeout, &NO_ANSWER);\n                return Flow::Next;",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis_stall"],
    ),
    (
        "redis-default-timeout-50ms",
        [
            (
                "crates/proxy/src/config/handlers.rs",
                "    Duration::from_millis(5)\n}",
                "    Duration::from_millis(50)\n}",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis_stall"],
    ),
    (
        "redis-timeouts-never-mark-down",
        [
            (
                "crates/proxy/src/middleware/rate_limit_redis/mod.rs",
                "|| self.timeouts_in_a_row.fetch_add(1, Relaxed) + 1 >= TIMEOUTS_DOWN;",
                "|| self.timeouts_in_a_row.fetch_add(1, Relaxed) + 1 > TIMEOUTS_DOWN;",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis_stall"],
    ),
    (
        "gcra-key-expires-early",
        [
            (
                "crates/proxy/src/middleware/rate_limit_redis/mod.rs",
                "'PX', math.ceil(ahead / 1000))",
                "'PX', math.ceil(ahead / 1000) - 30000)",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis::two_proxies"],
    ),
    (
        "retry-after-one-second-long",
        [
            (
                "crates/proxy/src/middleware/rate_limit.rs",
                "    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);",
                "    let seconds = wait.as_secs() + 1 + u64::from(wait.subsec_nanos() > 0);",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis::two_proxies"],
    ),
    (
        "retry-budget-one-more",
        [
            (
                "crates/proxy/src/upstream/retry.rs",
                "            .max(u64::from(budget.settings.min_per_second));",
                "            .max(u64::from(budget.settings.min_per_second) + 1);",
            ),
        ],
        ["-p", "proxy", "--test", "it", "balancing::the_retry_budget"],
    ),
    (
        "h3-one-more-concurrent-stream",
        [
            (
                "crates/proxy/src/server/h3/mod.rs",
                ".max_concurrent_bidi_streams(VarInt::from_u32(settings.max_concurrent_streams))",
                ".max_concurrent_bidi_streams(VarInt::from_u32(settings.max_concurrent_streams + 1))",
            ),
        ],
        ["-p", "proxy", "--test", "it", "http3::more_streams"],
    ),
    (
        "merge-offset-zero",
        [
            (
                "crates/load/src/merge.rs",
                "        let offset = ((summary.start_unix_s - start) / INTERVAL.as_secs_f64()).round() as u64;",
                "        let offset = 0u64;",
            ),
        ],
        ["-p", "sluice", "--test", "it", "load_distributed::apart::shards_started"],
    ),
    (
        "merge-unsent-not-summed",
        [
            (
                "crates/load/src/merge.rs",
                "        measured.unsent += summary.unsent;",
                "        measured.unsent = summary.unsent;",
            ),
        ],
        ["-p", "sluice", "--test", "it", "load_distributed::apart::requests_left"],
    ),
    (
        "listener-min-version-ignored",
        [
            (
                "crates/proxy/src/config/listener_tls.rs",
                "            min_version: self.min_version.0,",
                "            min_version: MinVersion::Tls12,",
            ),
        ],
        ["-p", "proxy", "--test", "it", "tls_settings"],
    ),
    (
        "fail-closed-lets-through",
        [
            (
                "crates/proxy/src/middleware/rate_limit_redis/mod.rs",
                "            OnFailure::FailClosed => Flow::Answer(Answer::problem(",
                "            OnFailure::FailClosed => Flow::Next,\n            #[allow(unreachable_patterns)]\n            OnFailure::FailClosed => Flow::Answer(Answer::problem(",
            ),
        ],
        ["-p", "proxy", "--test", "it", "rate_limit_redis"],
    ),
    (
        "h2-header-list-unbounded",
        [
            (
                "crates/proxy/src/server/h2.rs",
                "        .max_header_list_size(settings.max_header_list_bytes)",
                "        .max_header_list_size(settings.max_header_list_bytes.max(16 << 20))",
            ),
        ],
        ["-p", "proxy", "--test", "it", "http2_floods::an_hpack_bomb"],
    ),
    (
        "strict-mode-ignored",
        [
            (
                "crates/testkit/src/skip.rs",
                '        self.strict == Some("1") && !allowed',
                '        self.strict == Some("on") && !allowed',
            ),
        ],
        ["-p", "testkit", "--lib", "skip"],
    ),
]


def run(name, edits, args):
    originals = {}
    for path, old, _ in edits:
        if path not in originals:
            with open(path, encoding="utf-8") as f:
                originals[path] = f.read()
    changed = dict(originals)
    for path, old, new in edits:
        found = changed[path].count(old)
        if found != 1:
            return f"NOT APPLIED ({found} matches of the text in {path})"
        changed[path] = changed[path].replace(old, new)
    try:
        for path, text in changed.items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        command = ["nice", "-n", "10", "cargo", "test", "--locked", *args]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        took = time.monotonic() - started
        log = os.environ.get("MUTATIONS_LOG_DIR")
        if log:
            with open(os.path.join(log, f"{name}.log"), "w", encoding="utf-8") as f:
                f.write(done.stdout + done.stderr)
        failed_to_build = "error[E" in done.stderr or "error: could not compile" in done.stderr
        if failed_to_build:
            verdict = "DID NOT BUILD"
        elif done.returncode != 0:
            verdict = "killed"
        else:
            verdict = "SURVIVED"
        return f"{verdict} ({took:.0f} s): cargo test {' '.join(args)}"
    finally:
        for path, text in originals.items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


def main():
    wanted = sys.argv[1:]
    if wanted == ["--list"]:
        for name, edits, _ in MUTATIONS:
            print(f"{name}\t{' '.join(sorted({path for path, _, _ in edits}))}")
        return
    for name, edits, args in MUTATIONS:
        if wanted and name not in wanted:
            continue
        print(f"{name}: {run(name, edits, args)}", flush=True)


if __name__ == "__main__":
    main()
