//! The certificates `LocalCa` issues pass a strict RFC 5280 verifier:
//! pyca/cryptography's (what sslyze uses), which wants an Authority Key
//! Identifier in the leaf. Runs when `python3` with cryptography >= 42 is
//! there; otherwise says so and passes.

// A test panics on any failure.
#![allow(clippy::unwrap_used)]

use std::{process::Command, time::Duration};

use tls::LocalCa;

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
        return println!("skipped: no python3 to run pyca/cryptography's verifier");
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.code() == Some(77) {
        return println!(
            "skipped: python3 has no cryptography >= 42 ({})",
            said.trim()
        );
    }
    assert!(output.status.success(), "pyca/cryptography: {said}");
    assert_eq!(said.trim(), "verified");
}
