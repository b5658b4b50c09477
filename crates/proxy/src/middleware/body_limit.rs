//! `body_limit`: a lower request body limit for the routes that use it.
//! A declared length past it is answered 413 before anything is read; a
//! chunked body is cut off with 413 once it passes the limit.

use std::sync::Arc;

use http::StatusCode;

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config;

#[derive(Debug)]
pub(crate) struct BodyLimiter {
    max: usize,
}

impl Build for config::BodyLimitSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(BodyLimiter {
            max: usize::try_from(self.max).unwrap_or(usize::MAX),
        }))
    }
}

impl Handler for BodyLimiter {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        if request.body_len.is_some_and(|len| len > self.max) {
            return Flow::Answer(Answer::problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {} bytes", self.max),
            ));
        }
        exchange.max_body = exchange.max_body.min(self.max);
        Flow::Next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(limiter: &BodyLimiter, body_len: Option<usize>) -> (Flow, Exchange) {
        let headers = http::HeaderMap::new();
        let view = RequestView {
            method: &http::Method::POST,
            body_len,
            ..RequestView::get(&headers)
        };
        // As `limits.max_body_bytes` sets it (10 MiB by default).
        let mut exchange = Exchange {
            max_body: 10 << 20,
            ..Exchange::default()
        };
        let flow = limiter.request(&view, &mut exchange);
        (flow, exchange)
    }

    /// A declared length past the limit is 413 before anything is read;
    /// one within it, or none (chunked), passes with the limit lowered
    /// for the body as it streams.
    #[test]
    fn a_declared_length_past_the_limit_is_413_and_the_rest_streams_under_it() {
        let limiter = BodyLimiter { max: 1024 };
        match request(&limiter, Some(1025)).0 {
            Flow::Answer(answer) => assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE),
            _ => panic!("413 for a declared 1025 bytes"),
        }
        for declared in [Some(1024), Some(0), None] {
            let (flow, exchange) = request(&limiter, declared);
            assert!(matches!(flow, Flow::Next), "{declared:?}");
            assert_eq!(exchange.max_body, 1024, "{declared:?}");
        }
    }
}
