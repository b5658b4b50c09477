//! What a TLS listener allows (issue 26): `min_version`, and allow-lists
//! of cipher suites and key-exchange groups, over real sockets with
//! clients restricted to what they offer; names the file does not know
//! fail the load at their line; a reload applies new settings to new
//! connections and a bad one keeps the settings in use.

use crate::support;

use std::{io, net::SocketAddr, path::Path, sync::Arc, time::Duration};

use support::{
    live::{reload, scratch, start},
    Echo, Proxy,
};
use testkit::TestCerts;
use tls::{
    rustls::{
        pki_types::{pem::PemObject, CertificateDer, ServerName},
        version::{TLS12, TLS13},
        CipherSuite, ClientConfig, NamedGroup, ProtocolVersion, RootCertStore,
        SupportedProtocolVersion,
    },
    tokio_rustls::{client::TlsStream, TlsConnector},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// What a test client offers.
#[derive(Default)]
struct Offer {
    tls12_only: bool,
    suites: Vec<CipherSuite>,
    groups: Vec<NamedGroup>,
}

/// A client trusting the test CA that offers only what `offer` says.
fn client(certs: &TestCerts, offer: &Offer) -> TlsConnector {
    let policy = tls::Policy {
        min_version: tls::MinVersion::Tls12,
        cipher_suites: (!offer.suites.is_empty()).then(|| offer.suites.clone()),
        kx_groups: (!offer.groups.is_empty()).then(|| offer.groups.clone()),
    };
    let versions: &[&'static SupportedProtocolVersion] = if offer.tls12_only {
        &[&TLS12]
    } else {
        &[&TLS13, &TLS12]
    };
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&certs.ca_path).unwrap())
        .unwrap();
    let config = ClientConfig::builder_with_provider(policy.provider().unwrap())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

async fn handshake(addr: SocketAddr, connector: &TlsConnector) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp))
        .await
        .map_err(|_| io::Error::other("the handshake timed out"))?
}

/// Handshakes as `offer` says and GETs `/`: the version and suite agreed.
async fn get(
    addr: SocketAddr,
    certs: &TestCerts,
    offer: &Offer,
) -> io::Result<(ProtocolVersion, CipherSuite, NamedGroup)> {
    let mut tls = handshake(addr, &client(certs, offer)).await?;
    let (_, session) = tls.get_ref();
    let agreed = (
        session.protocol_version().unwrap(),
        session.negotiated_cipher_suite().unwrap().suite(),
        session.negotiated_key_exchange_group().unwrap().name(),
    );
    tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    Ok(agreed)
}

/// A configuration with one TLS listener (its further `tls` keys in
/// `extra`, each line indented by six spaces) in front of `echo`.
fn config(certs: &TestCerts, echo: SocketAddr, extra: &str) -> String {
    format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    tls:\n      cert: \"{}\"\n      key: \"{}\"\n{extra}admin: {{ address: 127.0.0.1:0 }}\n{}",
        certs.cert_path.display(),
        certs.key_path.display(),
        support::one_upstream(echo, "")
    )
}

const TLS12_SUITE: CipherSuite = CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256;

#[tokio::test]
async fn by_default_a_listener_accepts_tls12_and_tls13() {
    let echo = Echo::start("echo").await;
    let certs = TestCerts::generate();
    let proxy = Proxy::start_yaml(&config(&certs, echo.addr, ""));
    let tls12 = Offer {
        tls12_only: true,
        ..Offer::default()
    };
    let (version, suite, _) = get(proxy.addr(), &certs, &tls12).await.unwrap();
    assert_eq!(version, ProtocolVersion::TLSv1_2);
    assert_eq!(suite, CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384);
    let (version, _, group) = get(proxy.addr(), &certs, &Offer::default()).await.unwrap();
    assert_eq!(version, ProtocolVersion::TLSv1_3);
    assert_eq!(group, NamedGroup::X25519);
}

#[tokio::test]
async fn min_version_1_3_refuses_a_tls12_client_and_serves_tls13() {
    let echo = Echo::start("echo").await;
    let certs = TestCerts::generate();
    let proxy = Proxy::start_yaml(&config(&certs, echo.addr, "      min_version: \"1.3\"\n"));
    let tls12 = Offer {
        tls12_only: true,
        ..Offer::default()
    };
    let err = get(proxy.addr(), &certs, &tls12).await.unwrap_err();
    assert!(err.to_string().contains("ProtocolVersion"), "{err}");
    let (version, _, _) = get(proxy.addr(), &certs, &Offer::default()).await.unwrap();
    assert_eq!(version, ProtocolVersion::TLSv1_3);
}

#[tokio::test]
async fn the_cipher_suite_and_group_allow_lists_are_honoured() {
    let echo = Echo::start("echo").await;
    let certs = TestCerts::generate();
    let extra = "      cipher_suites: [TLS_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]\n      kx_groups: [secp384r1]\n";
    let proxy = Proxy::start_yaml(&config(&certs, echo.addr, extra));
    let addr = proxy.addr();
    // Only suites the list leaves out: no handshake, in TLS 1.3 and 1.2.
    let excluded = Offer {
        suites: vec![CipherSuite::TLS13_AES_128_GCM_SHA256, TLS12_SUITE],
        ..Offer::default()
    };
    let err = get(addr, &certs, &excluded).await.unwrap_err();
    assert!(err.to_string().contains("HandshakeFailure"), "{err}");
    // A listed suite, and the one group listed (after a retry request
    // for a key share in it).
    let listed = Offer {
        suites: vec![
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::TLS13_AES_256_GCM_SHA384,
        ],
        ..Offer::default()
    };
    let agreed = get(addr, &certs, &listed).await.unwrap();
    assert_eq!(
        agreed,
        (
            ProtocolVersion::TLSv1_3,
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            NamedGroup::secp384r1
        )
    );
    let tls12 = Offer {
        tls12_only: true,
        ..Offer::default()
    };
    let (version, suite, _) = get(addr, &certs, &tls12).await.unwrap();
    assert_eq!(version, ProtocolVersion::TLSv1_2);
    assert_eq!(
        suite,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
    // A client without a listed group.
    let x25519 = Offer {
        groups: vec![NamedGroup::X25519],
        ..Offer::default()
    };
    assert!(get(addr, &certs, &x25519).await.is_err());
}

/// The message a configuration fails to load with.
fn refused(certs: &TestCerts, extra: &str) -> String {
    let yaml = config(certs, "127.0.0.1:1".parse().unwrap(), extra);
    proxy::config::parse(&yaml, Path::new("test.yaml"), |_| None)
        .unwrap_err()
        .to_string()
}

#[test]
fn unknown_versions_suites_and_groups_are_refused_at_their_line_and_key() {
    let certs = TestCerts::generate();
    let err = refused(&certs, "      min_version: \"1.1\"\n");
    assert!(
        err.starts_with("test.yaml:7:20: listeners[0].tls.min_version: `1.1` is not a TLS version sluice offers; use \"1.2\" or \"1.3\""),
        "{err}"
    );
    let err = refused(
        &certs,
        "      cipher_suites:\n        - TLS13_AES_128_GCM_SHA256\n        - TLS_RSA_WITH_AES_128_CBC_SHA\n",
    );
    assert!(
        err.starts_with("test.yaml:9:11: listeners[0].tls.cipher_suites[1]: `TLS_RSA_WITH_AES_128_CBC_SHA` is not a cipher suite sluice offers; known: TLS13_AES_256_GCM_SHA384, "),
        "{err}"
    );
    let err = refused(&certs, "      kx_groups: [X25519, P-521]\n");
    assert!(
        err.starts_with("test.yaml:7:27: listeners[0].tls.kx_groups[1]: `P-521` is not a key-exchange group sluice offers; known: X25519, secp256r1, secp384r1"),
        "{err}"
    );
    let err = refused(&certs, "      kx_groups: []\n");
    assert!(
        err.starts_with("test.yaml: listeners[0].tls.kx_groups: list at least one"),
        "{err}"
    );
    // TLS 1.3 only, with TLS 1.2 suites only: nothing to agree on.
    let err = refused(
        &certs,
        "      min_version: \"1.3\"\n      cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n",
    );
    assert!(
        err.starts_with("test.yaml: listeners[0].tls.cipher_suites: none of the cipher suites is for TLS 1.3 or later"),
        "{err}"
    );
    // Unquoted, YAML reads a number: the same version.
    let yaml = config(
        &certs,
        "127.0.0.1:1".parse().unwrap(),
        "      min_version: 1.3\n",
    );
    let config = proxy::config::parse(&yaml, Path::new("test.yaml"), |_| None).unwrap();
    let policy = config.listeners[0].tls.as_ref().unwrap().policy();
    assert_eq!(policy.min_version, tls::MinVersion::Tls13);
}

#[tokio::test]
async fn a_reload_applies_new_tls_settings_to_new_connections_and_a_bad_one_keeps_them() {
    let echo = Echo::start("echo").await;
    let certs = TestCerts::generate();
    let dir = scratch("tls-settings");
    let file = dir.join("sluice.yaml");
    std::fs::write(&file, config(&certs, echo.addr, "")).unwrap();
    let proxy = start(&file);
    let (addr, admin) = (proxy.listeners[0], proxy.admin.unwrap());
    let tls12 = Offer {
        tls12_only: true,
        ..Offer::default()
    };
    get(addr, &certs, &tls12).await.unwrap();
    // A connection made before the reload keeps its TLS 1.2 session.
    let mut before = handshake(addr, &client(&certs, &tls12)).await.unwrap();

    let tls13 = "      min_version: \"1.3\"\n";
    std::fs::write(&file, config(&certs, echo.addr, tls13)).unwrap();
    let answer = reload(admin).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(get(addr, &certs, &tls12).await.is_err());
    get(addr, &certs, &Offer::default()).await.unwrap();
    before
        .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    before.read_to_end(&mut answer).await.unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"));

    // An unknown suite: the reload fails, TLS 1.3 only stays.
    let bad = format!("{tls13}      cipher_suites: [TLS_NULL_WITH_NULL_NULL]\n");
    std::fs::write(&file, config(&certs, echo.addr, &bad)).unwrap();
    let answer = reload(admin).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert!(
        answer.text().contains(
            "listeners[0].tls.cipher_suites[0]: `TLS_NULL_WITH_NULL_NULL` is not a cipher suite"
        ),
        "{}",
        answer.text()
    );
    assert!(get(addr, &certs, &tls12).await.is_err());
    get(addr, &certs, &Offer::default()).await.unwrap();

    // Back to the default: TLS 1.2 again.
    std::fs::write(&file, config(&certs, echo.addr, "")).unwrap();
    assert_eq!(reload(admin).await.status, 200);
    get(addr, &certs, &tls12).await.unwrap();
    proxy.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
