//! What every answer to an HTTP/1.1 client does, the upstream's or the
//! proxy's own: the chain's response phase (its header edits), the
//! request's row in the metrics, and whether the connection stays.

use http::StatusCode;
use http1::{Head, Persistence};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::session::Session;
use crate::{ids::RouteId, wire::edits::HeaderEdits};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Runs the chain's response phase; the edits it made, taken out of
    /// the exchange (give them back with `put_back_edits`), if any.
    pub(in crate::session) fn response_edits(&mut self, status: StatusCode) -> Option<HeaderEdits> {
        crate::session::response_edits(
            self.chain.as_ref(),
            &mut self.exchange,
            status,
            self.alt_svc,
        )
    }

    /// Returns the edits' buffers to the exchange, for the next request.
    pub(in crate::session) fn put_back_edits(&mut self, edits: Option<HeaderEdits>) {
        if let Some(edits) = edits {
            self.exchange.response_headers = edits;
        }
    }

    pub(in crate::session) fn count(&mut self, route: Option<RouteId>, status: StatusCode) {
        crate::session::traced::status(&mut self.span, status);
        let routes = self.plan.route_count();
        self.worker
            .metrics()
            .request(route, status.as_u16(), routes);
    }
}

pub(in crate::session) fn persistence(head: &Head, close: bool) -> Persistence {
    match (close, head.http10) {
        (true, _) => Persistence::Close,
        (false, true) => Persistence::KeepAlive10,
        (false, false) => Persistence::KeepAlive,
    }
}
