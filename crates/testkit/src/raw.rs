//! A raw HTTP/1.1 client: writes the exact bytes a test gives and parses
//! responses one at a time, so pipelining and malformed input can be tested.

use std::{net::SocketAddr, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Longest a raw client waits for any read or write before failing the test.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEADERS: usize = 64;

/// A parsed response.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics with the body text if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|err| panic!("body is not JSON ({err}): {}", self.text()))
    }
}

/// One client connection. Every operation panics on error or after
/// [`IO_TIMEOUT`], which is what a test wants.
#[derive(Debug)]
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .unwrap_or_else(|_| panic!("connect to {addr} timed out"))
            .unwrap_or_else(|err| panic!("connect to {addr}: {err}"));
        stream.set_nodelay(true).expect("set TCP_NODELAY");
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes raw bytes.
    pub async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        tokio::time::timeout(IO_TIMEOUT, self.stream.write_all(bytes.as_ref()))
            .await
            .expect("write timed out")
            .expect("write failed");
    }

    /// Sends a request with the given method, path, extra header lines and body.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &[u8],
    ) -> RawResponse {
        self.send(request_bytes(method, path, headers, body)).await;
        self.read_response(method == "HEAD").await
    }

    pub async fn get(&mut self, path: &str) -> RawResponse {
        self.request("GET", path, &[], b"").await
    }

    pub async fn post_json(&mut self, path: &str, body: &str) -> RawResponse {
        self.request(
            "POST",
            path,
            &["Content-Type: application/json"],
            body.as_bytes(),
        )
        .await
    }

    /// Reads the next response; `head` says it answers a HEAD request (no body).
    pub async fn read_response(&mut self, head: bool) -> RawResponse {
        tokio::time::timeout(IO_TIMEOUT, self.read_response_inner(head))
            .await
            .expect("timed out reading a response")
    }

    /// True if the server closes the connection (EOF) within [`IO_TIMEOUT`],
    /// after any buffered bytes; false if it sends more data.
    pub async fn is_closed_by_peer(&mut self) -> bool {
        let mut scratch = [0u8; 1024];
        match tokio::time::timeout(IO_TIMEOUT, self.stream.read(&mut scratch)).await {
            Ok(Ok(0)) | Ok(Err(_)) => self.buf.is_empty(),
            Ok(Ok(_)) => false,
            Err(_) => panic!("connection neither closed nor sent data"),
        }
    }

    async fn read_response_inner(&mut self, head: bool) -> RawResponse {
        let (status, headers, head_len) = loop {
            let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut parsed);
            match response.parse(&self.buf).expect("malformed response head") {
                httparse::Status::Complete(len) => {
                    let status = response.code.expect("status code");
                    let headers = response
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect::<Vec<_>>();
                    break (status, headers, len);
                }
                httparse::Status::Partial => {
                    self.fill()
                        .await
                        .expect("connection closed before a response");
                }
            }
        };
        self.buf.drain(..head_len);
        let mut response = RawResponse {
            status,
            headers,
            body: Vec::new(),
        };
        if head || status < 200 || status == 204 || status == 304 {
            return response;
        }
        if response
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
        {
            response.body = self.read_chunked().await;
        } else if let Some(len) = response.header("content-length") {
            let len: usize = len.trim().parse().expect("numeric content-length");
            response.body = self.take(len).await;
        } else {
            while self.fill().await.is_some() {}
            response.body = std::mem::take(&mut self.buf);
        }
        response
    }

    async fn fill(&mut self) -> Option<usize> {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Some(n)
            }
        }
    }

    async fn take(&mut self, len: usize) -> Vec<u8> {
        while self.buf.len() < len {
            self.fill().await.expect("connection closed inside a body");
        }
        self.buf.drain(..len).collect()
    }

    async fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf.drain(..end + 2).take(end).collect();
                return line;
            }
            self.fill()
                .await
                .expect("connection closed inside a chunked body");
        }
    }

    async fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await;
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).expect("chunk size");
            if size == 0 {
                // Trailers end with an empty line.
                while !self.line().await.is_empty() {}
                return body;
            }
            body.extend(self.take(size).await);
            self.take(2).await;
        }
    }
}

/// The bytes of an HTTP/1.1 request with `Host` and, for a body, `Content-Length`.
pub fn request_bytes(method: &str, path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for header in headers {
        out.push_str(header);
        out.push_str("\r\n");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}
