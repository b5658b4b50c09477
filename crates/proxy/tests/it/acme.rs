//! ACME certificates for a TLS listener (`tls.acme`) against Let's
//! Encrypt's test CA, Pebble, on loopback (bench/acme/install.sh): the
//! certificate is obtained at start over tls-alpn-01 and over http-01,
//! written to the listener's files, and renewed before it expires (Pebble
//! issues 16-second certificates to the renewal test, renewed with 8 s
//! left); new connections get the new one while a connection opened before
//! keeps working.

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use testkit::TestCerts;
use tls::rustls::pki_types::{pem::PemObject as _, CertificateDer};
use tokio::net::TcpStream;

use crate::support::{Echo, Proxy};

const DOMAIN: &str = "sluice.test";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Pebble and its DNS server, killed on drop.
struct Pebble {
    children: Vec<Child>,
    directory: String,
    management: SocketAddr,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Pebble {
    /// Pebble validating on `http_port` (http-01) and `tls_port`
    /// (tls-alpn-01), its own HTTPS with `certs`, issuing certificates valid
    /// for `validity_secs`; `None` after a skip line without the binaries.
    fn start(
        test: &str,
        dir: &Path,
        certs: &TestCerts,
        (http_port, tls_port): (u16, u16),
        validity_secs: u64,
    ) -> Option<Self> {
        let bin = std::env::var_os("SLUICE_PEBBLE")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/sluice/pebble")))
            .filter(|dir| {
                dir.join("pebble").is_file() && dir.join("pebble-challtestsrv").is_file()
            });
        let Some(bin) = bin else {
            testkit::skip(
                test,
                testkit::Need::Pebble,
                "no Pebble (bash bench/acme/install.sh; needs Go)",
            );
            return None;
        };
        let dns = format!("127.0.0.1:{}", free_port());
        let dns_server = Command::new(bin.join("pebble-challtestsrv"))
            .args([
                "-dnsserver",
                &dns,
                "-http01",
                "",
                "-https01",
                "",
                "-tlsalpn01",
                "",
                "-doh",
                "",
            ])
            .args([
                "-management",
                &format!("127.0.0.1:{}", free_port()),
                "-defaultIPv4",
                "127.0.0.1",
                "-defaultIPv6",
                "",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let management: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = serde_json::json!({ "pebble": {
            "listenAddress": listen.to_string(),
            "managementListenAddress": management.to_string(),
            "certificate": certs.cert_path,
            "privateKey": certs.key_path,
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "retryAfter": { "authz": 1, "order": 1 },
            "keyAlgorithm": "ecdsa",
            "profiles": { "default": { "description": "short-lived, for renewal", "validityPeriod": validity_secs } }
        }});
        let file = dir.join("pebble.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let mut pebble = Command::new(bin.join("pebble"))
            .arg("-config")
            .arg(&file)
            .args(["-dnsserver", &dns])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(pebble.stdout.take().unwrap());
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 && !line.contains("Listening on") {
            line.clear();
        }
        // Keep draining its log, so that it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Some(Self {
            children: vec![dns_server, pebble],
            directory: format!("https://{listen}/dir"),
            management,
        })
    }

    /// The root Pebble made at start (its management API).
    async fn root(&self, certs: &TestCerts) -> tls::rustls::RootCertStore {
        let tcp = TcpStream::connect(self.management).await.unwrap();
        let tls = certs
            .connector(&[b"http/1.1"])
            .connect("localhost".try_into().unwrap(), tcp)
            .await
            .unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let request = http::Request::get("/roots/0")
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let pem = sender
            .send_request(request)
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let mut roots = tls::rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    }
}

/// A TLS connection to the listener as `sluice.test`, trusting only
/// Pebble's root: the leaf it was given, and an HTTP/1.1 sender on it.
async fn connect(
    addr: SocketAddr,
    roots: &tls::rustls::RootCertStore,
) -> Option<(
    Vec<u8>,
    hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
)> {
    let mut config = tls::rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tls::tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(DOMAIN.try_into().unwrap(), tcp)
        .await
        .ok()?;
    let leaf = tls.get_ref().1.peer_certificates()?[0].to_vec();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    Some((leaf, sender))
}

async fn get(sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>) -> u16 {
    let request = http::Request::get("/")
        .header("host", DOMAIN)
        .body(Empty::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    response.into_body().collect().await.unwrap();
    status
}

/// The first PEM block of `path`, as DER.
fn leaf_on_disk(path: &Path) -> Vec<u8> {
    let pem = std::fs::read(path).unwrap();
    CertificateDer::pem_slice_iter(&pem)
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

async fn obtains_and_renews(test: &str, challenge: &str, renew: bool) {
    let dir = std::env::temp_dir().join(format!("sluice-acme-{}-{challenge}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let certs = TestCerts::generate();
    let (tls_port, http_port) = (free_port(), free_port());
    // Renewal starts 8 s before expiry and holds `order.lock` while it runs.
    // The checks after the first certificate must not meet it: the renewal
    // test gets 8 s of room (16-second certificates), the other none at all.
    let validity_secs = if renew { 16 } else { 3600 };
    let Some(pebble) = Pebble::start(test, &dir, &certs, (http_port, tls_port), validity_secs)
    else {
        return;
    };
    let echo = Echo::start("e").await;
    let (cert, key) = (dir.join("live/cert.pem"), dir.join("live/key.pem"));
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:{tls_port}\n    protocols: [h2, http1]\n    tls:\n      cert: \"{}\"\n      key: \"{}\"\n      acme: {{ directory: \"{}\", email: ops@sluice.test, domains: [{DOMAIN}], challenge: {challenge}, http_address: \"127.0.0.1:{http_port}\", ca_file: \"{}\", storage: \"{}\", renew_before: 8s, check_every: 500ms }}\n\
         upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
        cert.display(),
        key.display(),
        pebble.directory,
        certs.ca_path.display(),
        dir.join("acme").display(),
        echo.addr,
    ));
    let roots = pebble.root(&certs).await;
    let addr = proxy.addr();

    // Obtained at start: the placeholder first, Pebble's certificate soon.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (first, mut kept) = loop {
        if let Some(connection) = connect(addr, &roots).await {
            break connection;
        }
        assert!(
            Instant::now() < deadline,
            "no certificate from Pebble over {challenge}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(get(&mut kept).await, 200);
    assert_eq!(
        leaf_on_disk(&cert),
        first,
        "the certificate served is not the one stored"
    );
    assert!(
        dir.join("acme/account.json").is_file(),
        "the account was not stored"
    );
    assert!(
        !dir.join("acme/order.lock").exists(),
        "the order lock was left behind"
    );
    if !renew {
        return;
    }

    // Renewed before it expires (16 s, renewed with 8 s left).
    let deadline = Instant::now() + Duration::from_secs(30);
    let second = loop {
        let (leaf, mut sender) = connect(addr, &roots)
            .await
            .expect("a certificate Pebble signed");
        if leaf != first {
            assert_eq!(get(&mut sender).await, 200);
            break leaf;
        }
        assert!(Instant::now() < deadline, "never renewed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(leaf_on_disk(&cert), second);
    // The connection opened with the first certificate is still served.
    assert_eq!(
        get(&mut kept).await,
        200,
        "the connection made before the renewal was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_obtains_and_renews_over_tls_alpn_01_without_dropping_connections() {
    let test = "acme_obtains_and_renews_over_tls_alpn_01_without_dropping_connections";
    obtains_and_renews(test, "tls-alpn-01", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_obtains_over_http_01() {
    obtains_and_renews("acme_obtains_over_http_01", "http-01", false).await;
}
