//! `sluice proxy --check` with a Gateway API source: the status a
//! controller would write, and what is not supported named; the same
//! report in the log of a proxy that serves.

use std::{path::Path, process::Command};

#[test]
fn check_reports_gateway_api_status_and_names_what_is_not_supported() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", "examples/gateway-api/sluice.yaml", "--check"])
        .current_dir(root)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout.contains(
            "parent shop/edge: Accepted=True (Accepted) ResolvedRefs=True (ResolvedRefs)"
        ),
        "{stdout}"
    );
    // A filter sluice does not have: the route is not accepted, the
    // field named with its file, line and key, and --check exits 1.
    let dir = std::env::temp_dir().join(format!("sluice-gateway-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("k8s")).unwrap();
    let example = Path::new(root).join("examples/gateway-api");
    for file in ["gateway.yaml", "services.yaml"] {
        std::fs::copy(example.join("k8s").join(file), dir.join("k8s").join(file)).unwrap();
    }
    std::fs::write(
        dir.join("k8s/cors.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: cors, namespace: shop }\nspec:\n  parentRefs: [{ name: edge }]\n  rules:\n  - filters:\n    - type: CORS\n    backendRefs: [{ name: petstore, port: 8080 }]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sluice.yaml"),
        "gateway_api: { files: [k8s], address: 127.0.0.1, ports: { 80: 0 } }\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "proxy",
            "-c",
            dir.join("sluice.yaml").to_str().unwrap(),
            "--check",
        ])
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stdout.contains("Accepted=False (UnsupportedValue):"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cors.yaml:7: spec.rules[0].filters[0].type: `CORS` is not supported"),
        "{stdout}"
    );
    // Served, the same report goes to the log, as warnings: the route
    // that is not accepted is not served, and the log says so.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", dir.join("sluice.yaml").to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sluice");
    crate::common::first_address(&mut child, "http://");
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warned = |text: &str| {
        stderr
            .lines()
            .any(|line| line.contains("WARN") && line.contains(text))
    };
    assert!(
        warned("cors.yaml:7: spec.rules[0].filters[0].type: `CORS` is not supported"),
        "{stderr}"
    );
    assert!(warned("they are not served"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
