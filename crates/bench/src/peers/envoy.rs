//! Envoy: `envoy -c envoy.yaml --concurrency 1`, a static configuration
//! (no admin listener, no access log).

use std::{fmt::Write as _, path::Path};

use super::{room, Handler, ProxySite, Setup, Site, Unsupported, UpstreamProtocol};

/// Envoy on `dir/envoy.yaml`: one worker thread, no hot restart (so that
/// several run at once without a shared-memory `--base-id` each), warnings
/// only; `envoy --mode validate` checks the file.
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let yaml = envoy_yaml(site)?;
    Ok(Setup::one_file(
        dir,
        "envoy.yaml",
        yaml,
        &[
            "-c",
            "{}",
            "--concurrency",
            "1",
            "--disable-hot-restart",
            "--log-level",
            "warn",
        ],
    )
    .checked_by(&["--mode", "validate", "-c", "{}", "--log-level", "warn"]))
}

/// A YAML string: JSON's quoting is YAML's too.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The HTTP connection manager's fixed part: the codec guessed from the
/// first bytes (HTTP/1.1, or HTTP/2 with prior knowledge: `AUTO`), and no
/// `x-request-id` generated (sluice writes no request id on these rows:
/// that is its `correlation` handler's job). The HTTP filters follow.
const MANAGER: &str = r#"      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: front
          codec_type: AUTO
          generate_request_id: false
          http_filters:
"#;

/// The router, the last HTTP filter, and the route to the rest.
const ROUTER: &str = r#"          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
"#;

/// envoy.yaml: one listener on the site's address and, for a proxy, one
/// cluster of its upstreams.
pub(crate) fn envoy_yaml(site: &Site<'_>) -> Result<String, Unsupported> {
    let listen = match site {
        Site::Static { listen, .. } => *listen,
        Site::Proxy(proxy) => proxy.listen,
    };
    let mut yaml = format!(
        "static_resources:\n  listeners:\n  - name: front\n    address:\n      \
         socket_address: {{ address: {}, port_value: {} }}\n    filter_chains:\n    - filters:\n{MANAGER}",
        listen.ip(),
        listen.port()
    );
    if let Site::Proxy(ProxySite {
        handler: Some(handler),
        ..
    }) = site
    {
        filter(&mut yaml, handler);
    }
    yaml.push_str(ROUTER);
    match site {
        Site::Static {
            body, content_type, ..
        } => {
            let _ = write!(
                yaml,
                "                direct_response: {{ status: 200, body: {{ inline_string: {} }} }}\n                \
                 response_headers_to_add:\n                - header: {{ key: content-type, value: {} }}\n                  \
                 append_action: OVERWRITE_IF_EXISTS_OR_ADD\n",
                quoted(body),
                quoted(content_type)
            );
        }
        Site::Proxy(proxy) => {
            yaml.push_str("                route: { cluster: backend }\n");
            if let Some(tls) = proxy.tls {
                let _ = write!(
                    yaml,
                    "      transport_socket:\n        name: envoy.transport_sockets.tls\n        typed_config:\n          \
                     \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext\n          \
                     common_tls_context:\n            alpn_protocols: [http/1.1]\n            tls_certificates:\n            \
                     - certificate_chain: {{ filename: {} }}\n              private_key: {{ filename: {} }}\n",
                    quoted(&tls.cert.display().to_string()),
                    quoted(&tls.key.display().to_string())
                );
            }
            cluster(&mut yaml, proxy, room(site));
        }
    }
    Ok(yaml)
}

/// The HTTP filter for `handler`: `local_ratelimit`'s token bucket (one
/// for the listener: the bench's clients share one address, so it is the
/// per-client limit the others have), or `jwt_authn` with the JWKS file.
fn filter(yaml: &mut String, handler: &Handler<'_>) {
    match *handler {
        Handler::RateLimit { per_second } => {
            let _ = write!(
                yaml,
                "          - name: envoy.filters.http.local_ratelimit\n            typed_config:\n              \
                 \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n              \
                 stat_prefix: limit\n              \
                 token_bucket: {{ max_tokens: {per_second}, tokens_per_fill: {per_second}, fill_interval: 1s }}\n              \
                 filter_enabled: {{ runtime_key: limit_enabled, default_value: {{ numerator: 100, denominator: HUNDRED }} }}\n              \
                 filter_enforced: {{ runtime_key: limit_enforced, default_value: {{ numerator: 100, denominator: HUNDRED }} }}\n"
            );
        }
        Handler::Jwt {
            jwks,
            issuer,
            audience,
        } => {
            let _ = write!(
                yaml,
                "          - name: envoy.filters.http.jwt_authn\n            typed_config:\n              \
                 \"@type\": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication\n              \
                 providers:\n                bench:\n                  issuer: {}\n                  \
                 audiences: [{}]\n                  local_jwks: {{ filename: {} }}\n              \
                 rules:\n              - match: {{ prefix: \"/\" }}\n                requires: {{ provider_name: bench }}\n",
                quoted(issuer),
                quoted(audience),
                quoted(&jwks.display().to_string())
            );
        }
    }
}

/// The `backend` cluster: the upstreams, the balancing policy, circuit
/// breakers raised to the group's connections (their defaults, 1,024
/// connections and requests, would turn clients past them away with 503),
/// and the upstream protocol.
fn cluster(yaml: &mut String, proxy: &ProxySite<'_>, limit: usize) {
    let policy = if proxy.least_conn {
        "LEAST_REQUEST"
    } else {
        "ROUND_ROBIN"
    };
    let _ = write!(
        yaml,
        "  clusters:\n  - name: backend\n    type: STATIC\n    lb_policy: {policy}\n    \
         circuit_breakers:\n      thresholds:\n      - {{ max_connections: {limit}, \
         max_pending_requests: {limit}, max_requests: {limit} }}\n    load_assignment:\n      \
         cluster_name: backend\n      endpoints:\n      - lb_endpoints:\n"
    );
    for upstream in proxy.upstreams {
        let _ = writeln!(
            yaml,
            "        - endpoint: {{ address: {{ socket_address: {{ address: {}, port_value: {} }} }} }}",
            upstream.ip(),
            upstream.port()
        );
    }
    if !matches!(proxy.upstream_protocol, UpstreamProtocol::Http1) {
        yaml.push_str(
            "    typed_extension_protocol_options:\n      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \
             \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        \
             explicit_http_config: { http2_protocol_options: {} }\n",
        );
    }
    if let UpstreamProtocol::H2Tls { ca } = proxy.upstream_protocol {
        let _ = write!(
            yaml,
            "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \
             \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        \
             common_tls_context:\n          alpn_protocols: [h2]\n          \
             validation_context: {{ trusted_ca: {{ filename: {} }} }}\n",
            quoted(&ca.display().to_string())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, test_tls, test_tls_site};

    #[test]
    fn proxy_listener_and_cluster() {
        let upstreams = [addr(2), addr(3)];
        let tls = test_tls();
        let site = test_tls_site(&tls, &upstreams);
        let yaml = envoy_yaml(&site).expect("supported");
        for needle in [
            "socket_address: { address: 127.0.0.1, port_value: 1 }",
            "codec_type: AUTO",
            "generate_request_id: false",
            "lb_policy: LEAST_REQUEST",
            "max_connections: 12016, max_pending_requests: 12016, max_requests: 12016",
            "port_value: 2 } } }\n        - endpoint:",
            "DownstreamTlsContext",
            "certificate_chain: { filename: \"/c.pem\" }",
            "http2_protocol_options: {}",
            "alpn_protocols: [h2]",
            "trusted_ca: { filename: \"/ca.pem\" }",
        ] {
            assert!(yaml.contains(needle), "{needle:?} missing in:\n{yaml}");
        }
        let plain = Site::Proxy(ProxySite::plain(addr(1), &upstreams, 128));
        let yaml = envoy_yaml(&plain).expect("supported");
        assert!(yaml.contains("lb_policy: ROUND_ROBIN"), "{yaml}");
        assert!(yaml.contains("max_connections: 8000"), "{yaml}");
        assert!(!yaml.contains("http2_protocol_options"), "{yaml}");
        assert!(!yaml.contains("transport_socket"), "{yaml}");
    }

    #[test]
    fn static_site_answers_the_body() {
        let site = Site::Static {
            listen: addr(1),
            body: r#"[{"id":1}]"#,
            content_type: "application/json",
        };
        let yaml = envoy_yaml(&site).expect("supported");
        assert!(yaml.contains(r#"inline_string: "[{\"id\":1}]""#), "{yaml}");
        assert!(!yaml.contains("clusters"), "{yaml}");
    }
}
