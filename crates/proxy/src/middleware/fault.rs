//! `fault`: delays or aborts a share of requests, to test how clients and
//! the services behind them cope.

use std::{sync::Arc, time::Duration};

use http::StatusCode;

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::FaultSettings;

#[derive(Debug)]
pub(crate) struct FaultInjector {
    delay: Option<(Duration, f64)>,
    abort: Option<(StatusCode, f64)>,
}

impl Build for FaultSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(FaultInjector {
            delay: self.delay.as_ref().map(|d| (d.duration, d.percent)),
            abort: self.abort.as_ref().map(|a| (a.status, a.percent)),
        }))
    }
}

/// True for about `percent` in 100 calls.
fn chosen(percent: f64) -> bool {
    fastrand::f64() * 100.0 < percent
}

impl Handler for FaultInjector {
    fn request(&self, _request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        let abort = self
            .abort
            .filter(|(_, share)| chosen(*share))
            .map(|(status, _)| Answer::problem(status, "fault injected by the proxy"));
        match self.delay.filter(|(_, share)| chosen(*share)) {
            Some((delay, _)) => Flow::Wait(Box::pin(async move {
                tokio::time::sleep(delay).await;
                abort.map_or(Flow::Next, Flow::Answer)
            })),
            None => abort.map_or(Flow::Next, Flow::Answer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_about_right() {
        let hits = (0..10_000).filter(|_| chosen(25.0)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert_eq!((0..1000).filter(|_| chosen(0.0)).count(), 0);
        assert_eq!((0..1000).filter(|_| chosen(100.0)).count(), 1000);
    }
}
