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
