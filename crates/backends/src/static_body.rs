//! The fixed-size service of seeds/002's load-balancing test.

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};

use crate::{
    http1::{Request, Response},
    problem::method_not_allowed,
};

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");

/// One worker's copy of the body, so that cores share no reference count.
#[derive(Debug, Clone)]
pub(crate) struct StaticBody {
    body: Bytes,
}

impl StaticBody {
    /// A body of `size` bytes of printable ASCII.
    pub(crate) fn new(size: usize) -> Self {
        let body = b"abcdefghijklmnopqrstuvwxyz0123456789"
            .iter()
            .copied()
            .cycle()
            .take(size)
            .collect::<Vec<u8>>();
        Self {
            body: Bytes::from(body),
        }
    }

    pub(crate) fn handle(&self, req: &Request<'_>) -> Response {
        if !matches!(req.method, Method::GET | Method::HEAD) {
            return method_not_allowed(&req.method, "GET, HEAD");
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

    #[test]
    fn body_has_requested_size() {
        for size in [0, 1, 1024, 100_000] {
            let response = StaticBody::new(size).handle(&request(Method::GET));
            assert_eq!(response.body.len(), size);
        }
        assert_eq!(
            StaticBody::new(1).handle(&request(Method::POST)).status,
            405
        );
    }
}
