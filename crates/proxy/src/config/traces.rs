//! `traces:`: OpenTelemetry traces exported over OTLP (docs/OBSERVABILITY.md).
//! `log:` is the proxy's own log; this is the spans of requests. The
//! OpenTelemetry SDK's environment variables (`OTEL_EXPORTER_OTLP_*`,
//! `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER*`, `OTEL_RESOURCE_ATTRIBUTES`)
//! fill in what the file leaves out, as Caddy does; the file wins.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use schemars::JsonSchema;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};

use super::units::{optional_duration, optional_human};

/// Spans of requests, sent to an OpenTelemetry collector.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TracesSettings {
    #[serde(default)]
    pub otlp: OtlpSettings,
    #[serde(default)]
    pub sampler: SamplerSettings,
    /// `service.name` of the resource; default `OTEL_SERVICE_NAME`, else `sluice`.
    #[serde(default)]
    pub service_name: Option<String>,
    /// More resource attributes (after `OTEL_RESOURCE_ATTRIBUTES`).
    #[serde(default)]
    pub resource: BTreeMap<String, String>,
    /// Finished spans waiting for export at most; past it they are dropped
    /// (and counted), never waited for.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Spans sent in one export request at most.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Record `url.query` (SERVER spans) and the query of `url.full`
    /// (CLIENT spans) as sent (default: every value replaced by `REDACTED`).
    #[serde(default)]
    pub query: QueryPolicy,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueryPolicy {
    #[default]
    Redacted,
    Full,
    Omitted,
}

fn default_queue() -> usize {
    2048
}

fn default_batch() -> usize {
    512
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OtlpSettings {
    /// `http://HOST:PORT` (gRPC: the collector's 4317; HTTP: 4318, the
    /// path `/v1/traces` added when it has none).
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub protocol: Option<OtlpProtocol>,
    /// Sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub compression: Option<Compression>,
    /// One export request at most; default 10s.
    #[serde(
        default,
        deserialize_with = "optional_duration",
        serialize_with = "optional_human"
    )]
    pub timeout: Option<Duration>,
    /// `https://` endpoints: the CA certificates (PEM) the collector's
    /// certificate is checked against (`OTEL_EXPORTER_OTLP_CERTIFICATE`);
    /// default the web's roots (webpki-roots).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM) for a collector that asks for one
    /// (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`), with `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// Its private key (`OTEL_EXPORTER_OTLP_CLIENT_KEY`).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum OtlpProtocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    Gzip,
    None,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SamplerSettings {
    /// Sample this share of new traces (0 to 1); a request with a
    /// `traceparent` follows its parent's decision.
    #[serde(default, deserialize_with = "optional_ratio")]
    pub parent_based_ratio: Option<f64>,
}

fn optional_ratio<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let ratio = f64::deserialize(d)?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(D::Error::custom(format!(
            "a ratio is between 0 and 1, not {ratio}"
        )));
    }
    Ok(Some(ratio))
}

/// `traces:` with the SDK's environment variables filled in: what the
/// exporter runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceExport {
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    pub headers: Vec<(String, String)>,
    pub gzip: bool,
    pub timeout: Duration,
    pub ratio: f64,
    pub service_name: String,
    pub resource: Vec<(String, String)>,
    pub queue: usize,
    pub batch: usize,
    pub query: QueryPolicy,
    /// For an `https://` endpoint.
    pub tls: Option<OtlpTlsSettings>,
}

/// How the exporter checks the collector, and what it shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTlsSettings {
    /// `None`: the web's roots.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl TracesSettings {
    /// The settings, with `env` standing in for the environment; the
    /// error names the variable and what is wrong with it.
    pub fn settings(&self, env: impl Fn(&str) -> Option<String>) -> Result<TraceExport, String> {
        let var = |names: &[&'static str]| names.iter().find_map(|n| env(n).map(|v| (*n, v)));
        let protocol = match self.otlp.protocol {
            Some(protocol) => protocol,
            None => match var(&[
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]) {
                None => OtlpProtocol::Grpc,
                Some((_, v)) if v == "grpc" => OtlpProtocol::Grpc,
                Some((_, v)) if v == "http/protobuf" => OtlpProtocol::HttpProtobuf,
                Some((n, v)) => {
                    return Err(format!(
                        "{n}: `{v}` is not supported; use grpc or http/protobuf"
                    ))
                }
            },
        };
        let endpoint = match (&self.otlp.endpoint, protocol) {
            (Some(e), _) => e.clone(),
            (None, _) => {
                if let Some((_, v)) = var(&["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]) {
                    v
                } else if let Some((_, v)) = var(&["OTEL_EXPORTER_OTLP_ENDPOINT"]) {
                    match protocol {
                        // The general endpoint is a base: the signal's path goes on it.
                        OtlpProtocol::HttpProtobuf => {
                            format!("{}/v1/traces", v.trim_end_matches('/'))
                        }
                        OtlpProtocol::Grpc => v,
                    }
                } else {
                    match protocol {
                        OtlpProtocol::Grpc => "http://localhost:4317".into(),
                        OtlpProtocol::HttpProtobuf => "http://localhost:4318/v1/traces".into(),
                    }
                }
            }
        };
        let tls = self.tls(&endpoint, &var)?;
        let mut headers = Vec::new();
        if let Some((n, v)) = var(&[
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ]) {
            headers = pairs(&v).map_err(|e| format!("{n}: {e}"))?;
        }
        headers.extend(
            self.otlp
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let gzip = match self.otlp.compression {
            Some(c) => c == Compression::Gzip,
            None => match var(&[
                "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ]) {
                None => false,
                Some((_, v)) if v == "gzip" => true,
                Some((_, v)) if v == "none" => false,
                Some((n, v)) => return Err(format!("{n}: `{v}`; use gzip or none")),
            },
        };
        let timeout = match self.otlp.timeout {
            Some(t) => t,
            None => match var(&[
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ]) {
                None => Duration::from_secs(10),
                Some((n, v)) => Duration::from_millis(
                    v.parse()
                        .map_err(|_| format!("{n}: `{v}` is not a number of milliseconds"))?,
                ),
            },
        };
        let ratio = match self.sampler.parent_based_ratio {
            Some(r) => r,
            None => sampler_from_env(&env)?,
        };
        let mut resource = Vec::new();
        if let Some(v) = env("OTEL_RESOURCE_ATTRIBUTES") {
            resource = pairs(&v).map_err(|e| format!("OTEL_RESOURCE_ATTRIBUTES: {e}"))?;
        }
        resource.extend(self.resource.iter().map(|(k, v)| (k.clone(), v.clone())));
        let service_name = self
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "sluice".into());
        if self.queue == 0 || self.batch == 0 {
            return Err("queue and batch must be at least 1".into());
        }
        Ok(TraceExport {
            endpoint,
            protocol,
            headers,
            gzip,
            timeout,
            ratio,
            service_name,
            resource,
            queue: self.queue,
            tls,
            batch: self.batch,
            query: self.query,
        })
    }

    /// The TLS of an `https://` endpoint: the file's keys, else the SDK's
    /// variables. TLS keys in the file with an `http://` endpoint are an
    /// error (they would be ignored, and the spans sent in the clear).
    fn tls(
        &self,
        endpoint: &str,
        var: &impl Fn(&[&'static str]) -> Option<(&'static str, String)>,
    ) -> Result<Option<OtlpTlsSettings>, String> {
        let file = |key: &Option<PathBuf>, names: &[&'static str]| {
            key.clone()
                .or_else(|| var(names).map(|(_, v)| PathBuf::from(v)))
        };
        let ca_file = file(
            &self.otlp.ca_file,
            &[
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
            ],
        );
        let cert_file = file(
            &self.otlp.cert_file,
            &[
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            ],
        );
        let key_file = file(
            &self.otlp.key_file,
            &[
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            ],
        );
        let identity = match (cert_file, key_file) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(
                    "otlp.cert_file and otlp.key_file go together: give both or neither".into(),
                )
            }
        };
        if endpoint.starts_with("https://") {
            Ok(Some(OtlpTlsSettings { ca_file, identity }))
        } else if endpoint.starts_with("http://") {
            // The SDK's variables are ignored here, as the SDKs do (one
            // environment may serve several exporters); the file's keys not.
            let otlp = &self.otlp;
            if otlp.ca_file.is_some() || otlp.cert_file.is_some() || otlp.key_file.is_some() {
                return Err(format!(
                    "otlp.endpoint `{endpoint}` is http://: TLS settings (ca_file, cert_file, key_file) need an https:// endpoint"
                ));
            }
            Ok(None)
        } else {
            Err(format!(
                "otlp.endpoint `{endpoint}`: give http://HOST:PORT or https://HOST:PORT"
            ))
        }
    }
}

/// `OTEL_TRACES_SAMPLER` and its argument; default: every trace.
fn sampler_from_env(env: &impl Fn(&str) -> Option<String>) -> Result<f64, String> {
    let arg = || -> Result<f64, String> {
        match env("OTEL_TRACES_SAMPLER_ARG") {
            None => Ok(1.0),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| format!("OTEL_TRACES_SAMPLER_ARG: `{v}` is not a ratio (0 to 1)")),
        }
    };
    match env("OTEL_TRACES_SAMPLER").as_deref() {
        None | Some("parentbased_always_on") | Some("always_on") => Ok(1.0),
        Some("parentbased_always_off") | Some("always_off") => Ok(0.0),
        Some("parentbased_traceidratio") | Some("traceidratio") => arg(),
        Some(other) => Err(format!(
            "OTEL_TRACES_SAMPLER: `{other}` is not supported; use parentbased_traceidratio, parentbased_always_on or parentbased_always_off"
        )),
    }
}

/// `k1=v1,k2=v2` (the SDK's list format, values percent-decoded).
fn pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not key=value"))?;
            Ok((
                k.trim().to_string(),
                percent_encoding::percent_decode_str(v.trim())
                    .decode_utf8_lossy()
                    .into_owned(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traces(yaml: &str) -> TracesSettings {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn the_environment_fills_in_what_the_file_leaves_out() {
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://c:4318/".to_string()),
            "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("http/protobuf".into()),
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("a=b%20c,d=e".into()),
            "OTEL_SERVICE_NAME" => Some("edge".into()),
            "OTEL_TRACES_SAMPLER" => Some("parentbased_traceidratio".into()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("0.25".into()),
            _ => None,
        };
        let s = traces("{}").settings(env).unwrap();
        assert_eq!(s.endpoint, "http://c:4318/v1/traces");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(
            s.headers,
            [("a".into(), "b c".into()), ("d".into(), "e".into())]
        );
        assert_eq!(s.service_name, "edge");
        assert_eq!(s.ratio, 0.25);
        let s = traces("{otlp: {endpoint: 'http://x:4317', protocol: grpc}, sampler: {parent_based_ratio: 0.01}, service_name: a}")
            .settings(env)
            .unwrap();
        assert_eq!(
            (s.endpoint.as_str(), s.protocol, s.ratio),
            ("http://x:4317", OtlpProtocol::Grpc, 0.01)
        );
        assert_eq!(s.service_name, "a");
    }

    #[test]
    fn https_endpoints_take_tls_from_the_file_or_the_environment() {
        let s = traces("{otlp: {endpoint: 'https://c:4317'}}")
            .settings(|_| None)
            .unwrap();
        assert_eq!(
            s.tls,
            Some(OtlpTlsSettings {
                ca_file: None,
                identity: None
            })
        );
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_CERTIFICATE" => Some("/env/ca.pem".to_string()),
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE" => Some("/env/c.pem".into()),
            "OTEL_EXPORTER_OTLP_CLIENT_KEY" => Some("/env/k.pem".into()),
            _ => None,
        };
        let s = traces("{otlp: {endpoint: 'https://c:4317', ca_file: /file/ca.pem}}")
            .settings(env)
            .unwrap();
        assert_eq!(
            s.tls,
            Some(OtlpTlsSettings {
                ca_file: Some("/file/ca.pem".into()),
                identity: Some(("/env/c.pem".into(), "/env/k.pem".into()))
            })
        );
        let s = traces("{otlp: {endpoint: 'http://c:4317'}}")
            .settings(env)
            .unwrap();
        assert_eq!(s.tls, None);
    }

    #[test]
    fn bad_values_are_refused() {
        let env = |name: &str| (name == "OTEL_TRACES_SAMPLER").then(|| "jaeger".to_string());
        assert!(traces("{}")
            .settings(env)
            .unwrap_err()
            .contains("OTEL_TRACES_SAMPLER"));
        assert!(traces("{otlp: {endpoint: 'ftp://x'}}")
            .settings(|_| None)
            .unwrap_err()
            .contains("http://HOST:PORT or https://HOST:PORT"));
        assert!(
            traces("{otlp: {endpoint: 'http://x:4317', ca_file: ca.pem}}")
                .settings(|_| None)
                .unwrap_err()
                .contains("need an https:// endpoint")
        );
        assert!(
            traces("{otlp: {endpoint: 'https://x:4317', cert_file: c.pem}}")
                .settings(|_| None)
                .unwrap_err()
                .contains("go together")
        );
        assert!(
            serde_saphyr::from_str::<TracesSettings>("{sampler: {parent_based_ratio: 2}}").is_err()
        );
        assert!(serde_saphyr::from_str::<TracesSettings>("{otlp: {protocol: thrift}}").is_err());
    }
}
