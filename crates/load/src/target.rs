//! What to send: the target server and the request bytes, built once.

use std::fmt;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Uri};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    Http,
    Https,
}

/// The server all requests of a run go to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Target {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `host:port` as sent in `Host` (the port omitted when it is the scheme's default).
    pub fn authority(&self) -> String {
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}", self.authority())
    }
}

/// One request of the rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: Method,
    pub url: String,
    /// Origin-form path and query.
    pub path: String,
    /// This request's own headers, sent after the run's.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// This request's body, instead of the run's.
    pub body: Option<Bytes>,
    /// How often it is sent against the others (1: round-robin).
    pub weight: u32,
}

impl RequestSpec {
    /// `method url` (whose origin-form is `path`), with the run's headers and body, weight 1.
    pub fn new(method: Method, url: String, path: String) -> Self {
        Self {
            method,
            url,
            path,
            headers: Vec::new(),
            body: None,
            weight: 1,
        }
    }

    /// The run's headers then this request's.
    pub fn all_headers<'a>(
        &'a self,
        run: &'a [(HeaderName, HeaderValue)],
    ) -> impl Iterator<Item = &'a (HeaderName, HeaderValue)> + Clone {
        run.iter().chain(&self.headers)
    }

    /// This request's body, else the run's.
    pub fn body_or<'a>(&'a self, run: &'a Bytes) -> &'a Bytes {
        self.body.as_ref().unwrap_or(run)
    }
}

/// Splits an absolute `http(s)://host[:port]/path?query` URL.
pub fn parse_url(url: &str) -> Result<(Target, String), String> {
    let uri: Uri = url
        .parse()
        .map_err(|err| format!("invalid URL `{url}`: {err}"))?;
    let scheme = match uri.scheme_str() {
        Some("http") => Scheme::Http,
        Some("https") => Scheme::Https,
        Some(other) => {
            return Err(format!(
                "invalid URL `{url}`: scheme `{other}` is not http or https"
            ))
        }
        None => {
            return Err(format!(
                "invalid URL `{url}`: expected http://HOST[:PORT]/PATH"
            ))
        }
    };
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("invalid URL `{url}`: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    let path = uri
        .path_and_query()
        .map_or("/".to_string(), |pq| pq.as_str().to_string());
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    Ok((Target { scheme, host, port }, path))
}

/// Parses `Name: value` as given to `-H`.
pub fn parse_header(line: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| format!("invalid header `{line}`: expected `Name: value`"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("invalid header name in `{line}`"))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("invalid header value in `{line}`"))?;
    Ok((name, value))
}

/// Parses a requests file: one `[METHOD ]URL` per line; blank lines and `#` comments skipped.
pub fn parse_requests_file(
    text: &str,
    default_method: &Method,
) -> Result<Vec<(Method, String)>, String> {
    let mut requests = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (method, url) = match (words.next(), words.next(), words.next()) {
            (Some(url), None, _) => (default_method.clone(), url),
            (Some(method), Some(url), None) => {
                let method = Method::from_bytes(method.as_bytes())
                    .map_err(|_| format!("line {}: invalid method `{method}`", index + 1))?;
                (method, url)
            }
            _ => return Err(format!("line {}: expected `[METHOD ]URL`", index + 1)),
        };
        requests.push((method, url.to_string()));
    }
    if requests.is_empty() {
        return Err("no requests in the file".into());
    }
    Ok(requests)
}

/// The bytes of one request, with `Host` (unless given), the run's
/// `headers` and the request's own and, when there is a body (the
/// request's, else the run's `body`) or the method usually has one,
/// `Content-Length`.
pub fn request_bytes(
    spec: &RequestSpec,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &Bytes,
) -> Bytes {
    let body = spec.body_or(body);
    let headers = spec.all_headers(headers);
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(spec.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(spec.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.clone().any(|(name, _)| name == http::header::HOST) {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(target.authority().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let has_body_method = matches!(spec.method, Method::POST | Method::PUT | Method::PATCH);
    if !body.is_empty() || has_body_method {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// The head of one HTTP/2 request, cloned for every stream: the same
/// headers as [`request_bytes`] writes, with `Host` (given or not) as
/// `:authority`.
pub(crate) fn h2_request(
    spec: &RequestSpec,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &Bytes,
) -> Result<http::Request<()>, String> {
    let body = spec.body_or(body);
    let headers = spec.all_headers(headers);
    let host = headers
        .clone()
        .find(|(name, _)| name == http::header::HOST)
        .map(|(_, value)| value.to_str().map(str::to_string))
        .transpose()
        .map_err(|_| "the Host header is not a valid :authority".to_string())?;
    let scheme = match target.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let uri = Uri::builder()
        .scheme(scheme)
        .authority(host.unwrap_or_else(|| target.authority()))
        .path_and_query(spec.path.as_str())
        .build()
        .map_err(|err| format!("cannot make an HTTP/2 request of `{}`: {err}", spec.url))?;
    let mut request = http::Request::builder()
        .method(spec.method.clone())
        .uri(uri)
        .version(http::Version::HTTP_2);
    for (name, value) in headers {
        if name != http::header::HOST {
            request = request.header(name, value);
        }
    }
    let has_body_method = matches!(spec.method, Method::POST | Method::PUT | Method::PATCH);
    if !body.is_empty() || has_body_method {
        request = request.header(http::header::CONTENT_LENGTH, body.len());
    }
    request
        .body(())
        .map_err(|err| format!("cannot make an HTTP/2 request of `{}`: {err}", spec.url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let (target, path) = parse_url("http://127.0.0.1:8080/v1/pets?limit=1").unwrap();
        assert_eq!(target.authority(), "127.0.0.1:8080");
        assert_eq!(path, "/v1/pets?limit=1");
        let (target, path) = parse_url("https://example.test").unwrap();
        assert_eq!((target.port, path.as_str()), (443, "/"));
        assert_eq!(target.to_string(), "https://example.test");
        let (v6, _) = parse_url("http://[::1]:9000/").unwrap();
        assert_eq!(v6.authority(), "[::1]:9000");
        for bad in ["ftp://x/", "/just/a/path", "http://", "not a url"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers_and_request_files() {
        assert_eq!(parse_header("J-Tenant-Id: 1007").unwrap().1, "1007");
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: x").is_err());
        let file = "# comment\nhttp://h/a\n\nPOST http://h/b\n";
        let parsed = parse_requests_file(file, &Method::GET).unwrap();
        assert_eq!(parsed[1], (Method::POST, "http://h/b".to_string()));
        assert!(parse_requests_file("GET a b", &Method::GET).is_err());
    }

    #[test]
    fn request_bytes_have_host_and_length() {
        let (target, path) = parse_url("http://h:81/x").unwrap();
        let mut spec = RequestSpec::new(Method::POST, String::new(), path);
        let headers = [parse_header("X-A: 1").unwrap()];
        let bytes = request_bytes(&spec, &target, &headers, &Bytes::from_static(b"{}"));
        assert_eq!(
            &bytes[..],
            b"POST /x HTTP/1.1\r\nHost: h:81\r\nx-a: 1\r\nContent-Length: 2\r\n\r\n{}"
        );
        // A request's own headers follow the run's; its body replaces the run's.
        spec.headers = vec![parse_header("X-B: 2").unwrap()];
        spec.body = Some(Bytes::from_static(b"[1]"));
        let bytes = request_bytes(&spec, &target, &headers, &Bytes::from_static(b"{}"));
        assert_eq!(
            &bytes[..],
            b"POST /x HTTP/1.1\r\nHost: h:81\r\nx-a: 1\r\nx-b: 2\r\nContent-Length: 3\r\n\r\n[1]"
        );
    }

    #[test]
    fn h2_requests_carry_the_authority_and_length() {
        let (target, path) = parse_url("https://h:8443/x?y=1").unwrap();
        let spec = RequestSpec::new(Method::POST, String::new(), path);
        let headers = [parse_header("X-A: 1").unwrap()];
        let body = Bytes::from_static(b"{}");
        let request = h2_request(&spec, &target, &headers, &body).unwrap();
        assert_eq!(request.uri(), "https://h:8443/x?y=1");
        assert_eq!(request.headers()["x-a"], "1");
        assert_eq!(request.headers()["content-length"], "2");
        // A Host header becomes the :authority.
        let host = [parse_header("Host: api.test").unwrap()];
        let request = h2_request(&spec, &target, &host, &Bytes::new()).unwrap();
        assert_eq!(request.uri(), "https://api.test/x?y=1");
        assert!(request.headers().get("host").is_none());
    }
}
