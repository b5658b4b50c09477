//! Request and response flowing at once (issue 16, "Full duplex"): a
//! bidirectional gRPC-style stream interleaves through the proxy over h2c
//! and over TLS, HTTP/2 request trailers reach an HTTP/2 upstream, a
//! trailers-only answer carries no length, and an upstream's early answer
//! reaches a client that is still sending its body.
//!
//! One module each: bidi streams, request trailers, early answers.

mod bidi;
mod early_answers;
mod trailers;

use bytes::{Bytes, BytesMut};
use testkit::TestCerts;

/// A route to one HTTP/2 upstream at `url` (`http://` for h2c, `https://` for h2).
fn h2_upstream(url: &str, certs: Option<&TestCerts>) -> String {
    let (protocol, tls) = match certs {
        None => ("h2c", String::new()),
        Some(certs) => (
            "h2",
            format!("    tls: {{ ca: \"{}\" }}\n", certs.ca_path.display()),
        ),
    };
    format!(
        "upstreams:\n  grpc:\n    hosts: [\"{url}\"]\n    protocol: {protocol}\n{tls}routes:\n  - {{ path: /, upstream: grpc }}\n"
    )
}

/// A gRPC message: a 5-byte prefix (not compressed, big-endian length), then `payload`.
fn grpc_message(payload: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload.as_bytes());
    out.freeze()
}
