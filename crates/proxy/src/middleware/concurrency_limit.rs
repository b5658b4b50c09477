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
struct InFlight(Arc<AtomicUsize>);

/// The slots an exchange holds, one per `concurrency_limit` of its chain
/// (per-request state: given back when the done phase ends, or when the
/// exchange is dropped).
#[derive(Debug, Default)]
struct Held(Vec<InFlight>);

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
        exchange.state.get_mut::<Held>().0.push(permit);
        Flow::Next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(limiter: &ConcurrencyLimiter) -> (Flow, Exchange) {
        let headers = http::HeaderMap::new();
        let view = RequestView::get(&headers);
        let mut exchange = Exchange::default();
        let flow = limiter.request(&view, &mut exchange);
        (flow, exchange)
    }

    /// `max` exchanges hold a slot until they end (their `Exchange` is
    /// dropped, however that happens); one more is 503 at once and holds
    /// none; a slot given back is taken again.
    #[test]
    fn past_max_in_flight_is_503_and_a_finished_exchange_gives_its_slot_back() {
        let limiter = ConcurrencyLimiter {
            max: 2,
            in_flight: Arc::new(AtomicUsize::new(0)),
        };
        let (first, one) = request(&limiter);
        let (second, two) = request(&limiter);
        assert!(matches!(first, Flow::Next) && matches!(second, Flow::Next));
        match request(&limiter).0 {
            Flow::Answer(answer) => assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE),
            _ => panic!("503 past max"),
        }
        assert_eq!(limiter.in_flight.load(Ordering::Acquire), 2);
        drop(one);
        assert_eq!(limiter.in_flight.load(Ordering::Acquire), 1);
        let (third, _three) = request(&limiter);
        assert!(matches!(third, Flow::Next));
        drop(two);
        assert_eq!(limiter.in_flight.load(Ordering::Acquire), 1);
    }

    /// The done phase gives the slot back, and the exchange's next
    /// request holds it again.
    #[tokio::test]
    async fn the_done_phase_gives_the_slot_back() {
        let limiter = Arc::new(ConcurrencyLimiter {
            max: 1,
            in_flight: Arc::new(AtomicUsize::new(0)),
        });
        let chain =
            super::super::Chain::default().extended(vec![("limit".into(), limiter.clone())]);
        let headers = http::HeaderMap::new();
        let view = RequestView::get(&headers);
        let mut exchange = Exchange::default();
        let outcome = super::super::Outcome {
            status: StatusCode::OK,
            upstream: None,
            body_bytes: 0,
        };
        for _ in 0..2 {
            exchange.begin(Default::default(), 0, &http::Method::GET, 0);
            let answered = chain.request(&view, &mut exchange).await;
            assert!(answered.is_none(), "the slot was given back");
            assert_eq!(limiter.in_flight.load(Ordering::Acquire), 1);
            chain.done(&mut exchange, &outcome);
            assert_eq!(limiter.in_flight.load(Ordering::Acquire), 0);
        }
    }
}
