//! The certificates `LocalCa` issues pass a strict RFC 5280 verifier:
//! pyca/cryptography's (what sslyze uses), which wants an Authority Key
//! Identifier in the leaf. Runs when `python3` with cryptography >= 42 is
//! there; otherwise skips through testkit::skip (group `pyca`: a failure
//! under `SLUICE_STRICT=1`, as in CI, which installs it).

// A test panics on any failure.
#![allow(clippy::unwrap_used)]

use std::{process::Command, time::Duration};

use testkit::Need;
use tls::LocalCa;

const TEST: &str = "pyca_cryptography_verifies_an_issued_server_chain";

/// Exit status 77: cryptography (>= 42) is not importable.
const SCRIPT: &str = r#"
import sys, ipaddress
try:
    from cryptography import x509
    from cryptography.x509.verification import PolicyBuilder, Store
except ImportError as err:
    print(err)
    sys.exit(77)
ca = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
leaf = x509.load_pem_x509_certificate(open(sys.argv[2], "rb").read())
for name in [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]:
    PolicyBuilder().store(Store([ca])).build_server_verifier(name).verify(leaf, [])
print("verified")
"#;

#[test]
fn pyca_cryptography_verifies_an_issued_server_chain() {
    let dir = std::env::temp_dir().join(format!("sluice-tls-pyca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = LocalCa::generate("sluice test CA", Duration::from_secs(3600)).unwrap();
    let server = ca
        .server(&["localhost".into(), "127.0.0.1".into()])
        .unwrap();
    let (ca_path, leaf_path) = (dir.join("ca.pem"), dir.join("server.pem"));
    std::fs::write(&ca_path, &ca.ca.cert_pem).unwrap();
    std::fs::write(&leaf_path, &server.cert_pem).unwrap();
    let run = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&ca_path)
        .arg(&leaf_path)
        .output();
    std::fs::remove_dir_all(&dir).unwrap();
    let Ok(output) = run else {
        let reason = "no python3 to run pyca/cryptography's verifier (apt-get install python3)";
        return testkit::skip(TEST, Need::Pyca, reason);
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.code() == Some(77) {
        let reason = format!(
            "python3 has no cryptography >= 42 ({}; python3 -m pip install 'cryptography>=42')",
            said.trim()
        );
        return testkit::skip(TEST, Need::Pyca, &reason);
    }
    assert!(output.status.success(), "pyca/cryptography: {said}");
    assert_eq!(said.trim(), "verified");
}
