//! `fault`: delays or aborts a share of requests, to test how clients and
//! the services behind them cope.

use std::time::Duration;

use anyhow::bail;
use http::StatusCode;

use super::{Answer, Exchange, Flow, Handler, RequestView};

#[derive(Debug)]
pub(crate) struct FaultInjector {
    delay: Option<(Duration, f64)>,
    abort: Option<(StatusCode, f64)>,
}

impl FaultInjector {
    pub(crate) fn new(config: &crate::config::Fault) -> anyhow::Result<Self> {
        let abort = match &config.abort {
            None => None,
            Some(abort) => {
                let Ok(status) = StatusCode::from_u16(abort.status) else {
                    bail!("abort.status {} is not an HTTP status", abort.status);
                };
                if !(400..=599).contains(&abort.status) {
                    bail!("abort.status must be 400-599, not {}", abort.status);
                }
                Some((status, percent(abort.percent)?))
            }
        };
        let delay = match &config.delay {
            None => None,
            Some(delay) => Some((delay.duration, percent(delay.percent)?)),
        };
        Ok(Self { delay, abort })
    }
}

fn percent(value: f64) -> anyhow::Result<f64> {
    if !(0.0..=100.0).contains(&value) {
        bail!("percent must be between 0 and 100, not {value}");
    }
    Ok(value)
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
    fn shares_are_about_right_and_bounds_checked() {
        let hits = (0..10_000).filter(|_| chosen(25.0)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert_eq!((0..1000).filter(|_| chosen(0.0)).count(), 0);
        assert_eq!((0..1000).filter(|_| chosen(100.0)).count(), 1000);
        assert!(percent(101.0).is_err() && percent(-1.0).is_err() && percent(f64::NAN).is_err());
    }
}
