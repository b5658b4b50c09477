//! The PROXY protocol against the programs that define it in practice:
//! HAProxy in front of sluice (`send-proxy`, and `send-proxy-v2` with
//! its TLVs from a TLS frontend), and HAProxy (`accept-proxy`) and nginx
//! (`listen ... proxy_protocol`) behind it. The client connects from
//! 127.0.0.2; the balancers from 127.0.0.1, which sluice trusts.

use std::net::SocketAddr;

use testkit::TestCerts;

use super::{connect_from, request_after, status, upstream_saw};
use crate::support::{
    peers::{free_port, need, scratch, Running},
    Echo, Proxy,
};

const CLIENT: &str = "127.0.0.2";

/// HAProxy with `config` (the `global` and `defaults` sections are added).
async fn haproxy(test: &str, config: &str, ports: &[u16]) -> Option<Running> {
    let program = need(test, "haproxy")?;
    let dir = scratch("haproxy");
    let text = format!(
        "global\n    maxconn 256\ndefaults\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n{config}"
    );
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, text).unwrap();
    let args = ["-db", "-f", file.to_str().unwrap()];
    Some(Running::start(&program, &args, dir, ports).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_in_front_names_the_client_with_v1_and_v2() {
    let test = "haproxy_in_front_names_the_client_with_v1_and_v2";
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    proxy_protocol: {{ version: any, trusted: [127.0.0.1/32], headers: {{ authority: x-proxy-authority, unique_id: x-lb-id, tls_version: x-tls-version }} }}\nupstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
        echo.addr
    ));
    let sluice = proxy.addr();
    let (plain, tls) = (free_port(), free_port());
    let dir = scratch("haproxy-pem");
    let pem = dir.join("proxy.pem");
    let cert = std::fs::read_to_string(&certs.cert_path).unwrap();
    let key = std::fs::read_to_string(&certs.key_path).unwrap();
    std::fs::write(&pem, format!("{cert}\n{key}")).unwrap();
    let config = format!(
        "frontend plain\n    mode tcp\n    bind 127.0.0.1:{plain}\n    default_backend v1\nbackend v1\n    mode tcp\n    server sluice {sluice} send-proxy\nfrontend tls\n    mode http\n    bind 127.0.0.1:{tls} ssl crt {} alpn http/1.1\n    unique-id-format lb-%rt\n    default_backend v2\nbackend v2\n    mode http\n    server sluice {sluice} send-proxy-v2 proxy-v2-options ssl,authority,crc32c,unique-id\n",
        pem.display()
    );
    let Some(haproxy) = haproxy(test, &config, &[plain, tls]).await else {
        return;
    };
    // Version 1 from a TCP frontend.
    let mut stream = connect_from(CLIENT, SocketAddr::from(([127, 0, 0, 1], plain))).await;
    let answered_for_the_client = |answer: &str| {
        assert_eq!(status(answer), 200, "{answer}\n{}", haproxy.stderr());
        let forwarded = upstream_saw(answer, "x-forwarded-for");
        assert_eq!(forwarded.as_deref(), Some(CLIENT), "{answer}");
    };
    answered_for_the_client(&request_after(&mut stream, b"", "/pets", "").await);
    // Version 2 from a TLS frontend: the SSL, authority (SNI), CRC32C and
    // unique-id TLVs.
    let tcp = connect_from(CLIENT, SocketAddr::from(([127, 0, 0, 1], tls))).await;
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut stream = certs
        .connector(&[b"http/1.1"])
        .connect(name, tcp)
        .await
        .unwrap();
    let answer = request_after(&mut stream, b"", "/pets", "").await;
    answered_for_the_client(&answer);
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-proto").as_deref(),
        Some("https")
    );
    assert_eq!(
        upstream_saw(&answer, "x-proxy-authority").as_deref(),
        Some("localhost")
    );
    assert_eq!(
        upstream_saw(&answer, "x-tls-version").as_deref(),
        Some("TLSv1.3")
    );
    let id = upstream_saw(&answer, "x-lb-id").unwrap_or_default();
    assert!(id.starts_with("lb-"), "{answer}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A proxy whose upstreams `v1` and `v2` are `target`, each with its
/// `proxy_protocol` version, routed at `/v1` and `/v2`.
fn sending_to(target: SocketAddr) -> Proxy {
    Proxy::start(&format!(
        "upstreams:\n  v1:\n    hosts: [\"http://{target}\"]\n    proxy_protocol: v1\n  v2:\n    hosts: [\"http://{target}\"]\n    proxy_protocol: v2\nroutes:\n  - {{ path: /v1, upstream: v1 }}\n  - {{ path: /v2, upstream: v2 }}\n"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_behind_reads_the_client_from_our_header() {
    let test = "haproxy_behind_reads_the_client_from_our_header";
    let echo = Echo::start("e").await;
    let port = free_port();
    let config = format!(
        "frontend pp\n    mode http\n    bind 127.0.0.1:{port} accept-proxy\n    http-request set-header x-proxied-src %[src]\n    default_backend echo\nbackend echo\n    mode http\n    server e {}\n",
        echo.addr
    );
    let Some(haproxy) = haproxy(test, &config, &[port]).await else {
        return;
    };
    let proxy = sending_to(SocketAddr::from(([127, 0, 0, 1], port)));
    for path in ["/v1/pets", "/v2/pets"] {
        let mut stream = connect_from(CLIENT, proxy.addr()).await;
        let answer = request_after(&mut stream, b"", path, "").await;
        assert_eq!(
            status(&answer),
            200,
            "{path}: {answer}\n{}",
            haproxy.stderr()
        );
        assert_eq!(
            upstream_saw(&answer, "x-proxied-src").as_deref(),
            Some(CLIENT),
            "{answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_behind_reads_the_client_from_our_header() {
    let test = "nginx_behind_reads_the_client_from_our_header";
    let Some(nginx) = need(test, "nginx") else {
        return;
    };
    let echo = Echo::start("e").await;
    let port = free_port();
    let dir = scratch("nginx");
    let d = dir.display();
    let config = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  server {{\n    listen 127.0.0.1:{port} proxy_protocol;\n    location / {{\n      proxy_pass http://{};\n      proxy_set_header x-proxied-src $proxy_protocol_addr;\n    }}\n  }}\n}}\n",
        echo.addr
    );
    let file = dir.join("nginx.conf");
    std::fs::write(&file, config).unwrap();
    let args = [
        "-p",
        dir.to_str().unwrap(),
        "-c",
        file.to_str().unwrap(),
        "-e",
        "stderr",
    ];
    let nginx = Running::start(&nginx, &args, dir.clone(), &[port]).await;
    let proxy = sending_to(SocketAddr::from(([127, 0, 0, 1], port)));
    for path in ["/v1/pets", "/v2/pets"] {
        let mut stream = connect_from(CLIENT, proxy.addr()).await;
        let answer = request_after(&mut stream, b"", path, "").await;
        assert_eq!(status(&answer), 200, "{path}: {answer}\n{}", nginx.stderr());
        assert_eq!(
            upstream_saw(&answer, "x-proxied-src").as_deref(),
            Some(CLIENT),
            "{answer}"
        );
    }
}
