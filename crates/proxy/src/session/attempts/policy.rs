//! A route's own timeouts and retries (`routes[].timeouts`,
//! `routes[].retries`) over its upstream's, as the exchange asks for them,
//! and the upstream's sticky and application cookies.

use std::{sync::atomic::Ordering::Relaxed, time::Duration};

use http::StatusCode;
use tracing::warn;

use super::Hosts;
use crate::ids::HostId;
use crate::session::Failure;
use crate::telemetry::UpstreamError;
use crate::upstream::retry::RetryPolicy;
use crate::wire::edits::{with_cookie, HeaderEdits};
use crate::wire::fields::Fields;

impl<'a> Hosts<'a> {
    /// When a failed attempt goes again: the route's rules, else the upstream's.
    pub(super) fn retry_policy(&self) -> &'a RetryPolicy {
        match self.route.and_then(|r| r.retries.as_ref()) {
            Some(retries) => &retries.policy,
            None => &self.plan.upstream(self.upstream).retry,
        }
    }

    /// Further attempts a request may make (`retries`).
    pub(crate) fn retries(&self) -> u32 {
        match self.route.and_then(|r| r.retries.as_ref()) {
            Some(retries) => retries.attempts,
            None => self.plan.upstream(self.upstream).retries,
        }
    }

    /// How long one attempt waits for its answer's head.
    pub(crate) fn attempt_timeout(&self) -> Duration {
        self.route
            .and_then(|r| r.backend_timeout)
            .unwrap_or(self.plan.upstream(self.upstream).timeouts.request)
    }

    /// How long the attempts together may take (the route's `timeouts.request`).
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.route.and_then(|r| r.request_timeout)
    }

    /// 504 after the route's whole-request `limit` ran out.
    pub(crate) fn request_timed_out(&self, limit: Duration, body_unread: bool) -> Failure {
        self.worker
            .metrics()
            .upstream_error(self.upstream, UpstreamError::Timeout);
        let config = self.plan.upstream(self.upstream);
        warn!(upstream = %config.name, peer = %self.peer, "no response within the route's request timeout ({limit:?})");
        Failure {
            body_unread,
            ..Failure::new(
                StatusCode::GATEWAY_TIMEOUT,
                "no response within the route's request timeout",
            )
        }
    }

    /// The response's header edits with the sticky cookie for `host`
    /// added, when the request did not already carry a valid one.
    pub(crate) fn with_cookie(
        &self,
        host: HostId,
        edits: Option<HeaderEdits>,
    ) -> Option<HeaderEdits> {
        with_cookie(edits, self.cookie(host))
    }

    /// Learns the application cookie values `host` set in its answer.
    #[inline]
    pub(crate) fn learn_cookies(&self, host: HostId, fields: Fields<'_>) {
        let balancer = &self.config().balancer;
        if balancer.app_cookie().is_some() {
            for value in fields.get_all("set-cookie") {
                balancer.learn(host, value);
            }
        }
    }

    /// The sticky cookie the answer from `host` must carry, if any.
    #[inline]
    pub(crate) fn cookie(&self, host: HostId) -> Option<&'a http::HeaderValue> {
        if !self.set_cookie.load(Relaxed) {
            return None;
        }
        self.config().balancer.sticky_cookie(host)
    }
}
