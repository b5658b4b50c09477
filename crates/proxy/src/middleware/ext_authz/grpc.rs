//! `ext_authz` over gRPC: Envoy's `envoy.service.auth.v3.Authorization/Check`
//! on an h2c connection. The messages are the published proto's (the
//! field numbers of external_auth.proto, attribute_context.proto,
//! base.proto, address.proto, http_status.proto and google/rpc/status.proto),
//! written here with prost's derive for the fields sluice sends and reads,
//! so the build needs no protoc; unknown fields of an answer are skipped,
//! as protobuf requires.

use std::collections::HashMap;

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use prost::Message as _;

use super::{Asked, Decision, Failed};

const PATH: &str = "/envoy.service.auth.v3.Authorization/Check";
/// An answer larger than this is a broken one.
const MAX_ANSWER: usize = 256 * 1024;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CheckRequest {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<AttributeContext>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AttributeContext {
    #[prost(message, optional, tag = "1")]
    pub source: Option<Peer>,
    #[prost(message, optional, tag = "2")]
    pub destination: Option<Peer>,
    #[prost(message, optional, tag = "4")]
    pub request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Peer {
    #[prost(message, optional, tag = "1")]
    pub address: Option<Address>,
}

/// `config.core.v3.Address`, its `socket_address` arm.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Address {
    #[prost(message, optional, tag = "1")]
    pub socket_address: Option<SocketAddress>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SocketAddress {
    #[prost(string, tag = "2")]
    pub address: String,
    #[prost(uint32, tag = "3")]
    pub port_value: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Request {
    #[prost(message, optional, tag = "2")]
    pub http: Option<HttpRequest>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HttpRequest {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub method: String,
    #[prost(map = "string, string", tag = "3")]
    pub headers: HashMap<String, String>,
    #[prost(string, tag = "4")]
    pub path: String,
    #[prost(string, tag = "5")]
    pub host: String,
    #[prost(string, tag = "6")]
    pub scheme: String,
    #[prost(int64, tag = "9")]
    pub size: i64,
    #[prost(string, tag = "10")]
    pub protocol: String,
    #[prost(bytes = "vec", tag = "12")]
    pub raw_body: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CheckResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<RpcStatus>,
    #[prost(message, optional, tag = "2")]
    pub denied_response: Option<DeniedHttpResponse>,
    #[prost(message, optional, tag = "3")]
    pub ok_response: Option<OkHttpResponse>,
}

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DeniedHttpResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<HttpStatus>,
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, tag = "3")]
    pub body: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OkHttpResponse {
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, repeated, tag = "5")]
    pub headers_to_remove: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub response_headers_to_add: Vec<HeaderValueOption>,
}

/// `type.v3.HttpStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HttpStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HeaderValueOption {
    #[prost(message, optional, tag = "1")]
    pub header: Option<CoreHeaderValue>,
}

/// `config.core.v3.HeaderValue`: `raw_value` wins when it is set.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CoreHeaderValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(bytes = "vec", tag = "3")]
    pub raw_value: Vec<u8>,
}

/// The fields of `options` that are valid names and values.
fn fields(options: &[HeaderValueOption]) -> Vec<(HeaderName, HeaderValue)> {
    options
        .iter()
        .filter_map(|option| {
            let header = option.header.as_ref()?;
            let name = HeaderName::from_bytes(header.key.as_bytes()).ok()?;
            let value = if header.raw_value.is_empty() {
                HeaderValue::from_str(&header.value).ok()?
            } else {
                HeaderValue::from_bytes(&header.raw_value).ok()?
            };
            Some((name, value))
        })
        .collect()
}

/// The CheckRequest for `asked`.
fn check_request(asked: &Asked) -> CheckRequest {
    let mut headers = HashMap::new();
    for (name, value) in &asked.headers {
        // Repeated fields are merged with `,` (the proto says so).
        headers
            .entry(name.as_str().to_string())
            .and_modify(|v: &mut String| {
                v.push(',');
                v.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    let socket = |ip: std::net::IpAddr, port: u16| Peer {
        address: Some(Address {
            socket_address: Some(SocketAddress {
                address: ip.to_string(),
                port_value: u32::from(port),
            }),
        }),
    };
    CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(socket(asked.client_ip, 0)),
            destination: None,
            request: Some(Request {
                http: Some(HttpRequest {
                    id: String::new(),
                    method: asked.method.clone(),
                    headers,
                    path: asked.uri.clone(),
                    host: asked.host.clone(),
                    scheme: asked.scheme.into(),
                    size: asked
                        .body_len
                        .map_or(-1, |n| i64::try_from(n).unwrap_or(-1)),
                    protocol: String::new(),
                    raw_body: asked.body.as_ref().map(|b| b.to_vec()).unwrap_or_default(),
                }),
            }),
        }),
    }
}

/// A gRPC message: the 5-byte prefix (not compressed, length) and `message`.
fn framed(message: &impl prost::Message) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.encoded_len());
    out.put_u8(0);
    out.put_u32(u32::try_from(message.encoded_len()).unwrap_or(u32::MAX));
    message.encode(&mut out).expect("a BytesMut grows");
    out.freeze()
}

/// The Check method's URL at the service `base`.
pub(super) fn url(base: &http::Uri) -> String {
    format!(
        "http://{}{PATH}",
        base.authority().map_or("", http::uri::Authority::as_str)
    )
}

/// Asks the service at `base` (an h2c client) and reads its decision.
pub(super) async fn check(
    client: &Client<HttpConnector, Full<Bytes>>,
    base: &http::Uri,
    asked: &Asked,
) -> Result<Decision, Failed> {
    let mut request = http::Request::post(url(base))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(traceparent) = &asked.traceparent {
        // The call's trace context as gRPC metadata (W3C Trace Context).
        request = request.header("traceparent", &traceparent[..]);
    }
    let request = request
        .body(Full::new(framed(&check_request(asked))))
        .map_err(|_| Failed::Broken("the request could not be made"))?;
    let response = client
        .request(request)
        .await
        .map_err(|_| Failed::Unreachable)?;
    if response.status() != StatusCode::OK {
        return Err(Failed::Broken("the gRPC answer's HTTP status is not 200"));
    }
    let (parts, mut body) = response.into_parts();
    let mut data = BytesMut::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Failed::Broken("the gRPC answer broke off"))?;
        match frame.into_data() {
            Ok(chunk) => {
                if data.len() + chunk.len() > MAX_ANSWER {
                    return Err(Failed::Broken("the gRPC answer is too large"));
                }
                data.extend_from_slice(&chunk);
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    // A trailers-only answer carries grpc-status in its headers.
    let grpc_status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| parts.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok()?.parse::<i32>().ok());
    if grpc_status != Some(0) {
        return Err(Failed::Broken(
            "the authorization service answered a gRPC error",
        ));
    }
    if data.len() < 5 || data[0] != 0 {
        return Err(Failed::Broken(
            "the gRPC answer is not one uncompressed message",
        ));
    }
    let mut frame = data.freeze();
    frame.advance(1);
    let len = frame.get_u32() as usize;
    if frame.len() != len {
        return Err(Failed::Broken("the gRPC answer's length is wrong"));
    }
    let answer = CheckResponse::decode(frame)
        .map_err(|_| Failed::Broken("the CheckResponse does not decode"))?;
    Ok(decision(answer))
}

/// The decision of a CheckResponse's bytes, if they decode.
pub(crate) fn decision_of(bytes: &[u8]) -> Option<Decision> {
    CheckResponse::decode(bytes).ok().map(decision)
}

/// Status OK allows; anything else denies (403 unless the denial says).
fn decision(answer: CheckResponse) -> Decision {
    let ok = answer.status.as_ref().is_none_or(|s| s.code == 0);
    if ok {
        let ok = answer.ok_response.unwrap_or_default();
        return Decision::Allow {
            upstream: fields(&ok.headers),
            remove: ok
                .headers_to_remove
                .iter()
                .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
                .collect(),
            client: fields(&ok.response_headers_to_add),
        };
    }
    let denied = answer.denied_response.unwrap_or_default();
    let status = denied
        .status
        .and_then(|s| u16::try_from(s.code).ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .filter(|s| !s.is_informational() && !s.is_success())
        .unwrap_or(StatusCode::FORBIDDEN);
    Decision::Deny {
        status,
        headers: fields(&denied.headers),
        body: Bytes::from(denied.body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_unknown_fields_decodes_and_denies_with_its_status() {
        let answer = CheckResponse {
            status: Some(RpcStatus {
                code: 7,
                message: "no".into(),
            }),
            denied_response: Some(DeniedHttpResponse {
                status: Some(HttpStatus { code: 401 }),
                headers: Vec::new(),
                body: "who are you".into(),
            }),
            ok_response: None,
        };
        let mut bytes = answer.encode_to_vec();
        // field 4 (dynamic_metadata, a Struct): an unknown field here.
        bytes.extend_from_slice(&[0x22, 0x00]);
        let decoded = CheckResponse::decode(&bytes[..]).unwrap();
        match decision(decoded) {
            Decision::Deny { status, body, .. } => {
                assert_eq!(status, StatusCode::UNAUTHORIZED);
                assert_eq!(&body[..], b"who are you");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_denial_without_a_status_or_with_2xx_is_403() {
        for code in [None, Some(200), Some(0), Some(99_999)] {
            let answer = CheckResponse {
                status: Some(RpcStatus {
                    code: 7,
                    message: String::new(),
                }),
                denied_response: Some(DeniedHttpResponse {
                    status: code.map(|code| HttpStatus { code }),
                    ..Default::default()
                }),
                ok_response: None,
            };
            assert!(matches!(
                decision(answer),
                Decision::Deny {
                    status: StatusCode::FORBIDDEN,
                    ..
                }
            ));
        }
    }
}
