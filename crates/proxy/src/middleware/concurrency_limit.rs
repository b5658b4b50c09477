//! `concurrency_limit`: at most `max` requests in flight through one
//! handler instance (so per route when each route has its own); past it,
//! 503 at once rather than a queue that hides overload.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use http::StatusCode;

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::ConcurrencyLimitSettings;

#[derive(Debug)]
pub(crate) struct ConcurrencyLimiter {
    max: usize,
    in_flight: Arc<AtomicUsize>,
}

/// One request counted in flight until dropped, however its exchange ends.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Build for ConcurrencyLimitSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(ConcurrencyLimiter {
            max: self.max,
            in_flight: Arc::new(AtomicUsize::new(0)),
        }))
    }
}

impl Handler for ConcurrencyLimiter {
    fn request(&self, _request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let permit = InFlight(Arc::clone(&self.in_flight));
        if before >= self.max {
            drop(permit);
            return Flow::Answer(Answer::problem(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("more than {} requests in flight on this route", self.max),
            ));
        }
        exchange.in_flight.push(permit);
        Flow::Next
    }
}
