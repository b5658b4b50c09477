//! The fixed-size service of seeds/002's load-balancing test.

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};

use crate::{
    message::{Request, Response},
    problem::method_not_allowed,
};

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");

/// One worker's copy of the body, so that cores share no reference count.
#[derive(Debug, Clone)]
pub(crate) struct StaticBody {
    body: Bytes,
    delay: std::time::Duration,
}

impl StaticBody {
    /// A body of `size` bytes of printable ASCII, answered after `delay`.
    pub(crate) fn new(size: usize, delay: std::time::Duration) -> Self {
        let body = b"abcdefghijklmnopqrstuvwxyz0123456789"
            .iter()
            .copied()
            .cycle()
            .take(size)
            .collect::<Vec<u8>>();
        Self {
            body: Bytes::from(body),
            delay,
        }
    }

    pub(crate) async fn handle(&self, req: &Request<'_>) -> Response {
        if !matches!(req.method, Method::GET | Method::HEAD) {
            return method_not_allowed(&req.method, "GET, HEAD");
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Response::new(StatusCode::OK, TEXT_PLAIN, self.body.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method) -> Request<'static> {
        Request {
            method,
            path: "/",
            query: None,
            content_type: None,
            body: b"",
        }
    }

    #[tokio::test]
    async fn body_has_requested_size() {
        let zero = std::time::Duration::ZERO;
        for size in [0, 1, 1024, 100_000] {
            let response = StaticBody::new(size, zero)
                .handle(&request(Method::GET))
                .await;
            assert_eq!(response.body.len(), size);
        }
        assert_eq!(
            StaticBody::new(1, zero)
                .handle(&request(Method::POST))
                .await
                .status,
            405
        );
    }
}
