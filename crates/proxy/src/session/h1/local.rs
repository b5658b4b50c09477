//! Answers of the proxy's own: problem+json for failures, `405` with
//! `Allow`, `204` for `OPTIONS *`, and a handler's early answer.

use crate::ids::RouteId;
use crate::middleware::{Answer, Outcome};
use crate::session::{h1::response::persistence, Failure, Next, Session, Unrouted, CLIENT_CLOSED};
use crate::telemetry::Event;
use crate::wire::edits::HeaderEdits;
use http1::{Framing as RequestFraming, Head, Persistence, Problem};

use bytes::Buf;
use http::{header, Method, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Answers a failed exchange with a problem body.
    pub(in crate::session) async fn fail(
        &mut self,
        head: &Head,
        route: Option<RouteId>,
        failure: Failure,
    ) -> Next {
        if failure.status == CLIENT_CLOSED {
            // Nobody to answer: the upstream exchange was dropped with it.
            self.count(route, failure.status);
            self.worker.metrics().event(Event::ClientClosed);
            return Next::Abort;
        }
        let close = failure.body_unread
            || !head.keep_alive
            || failure.status == StatusCode::BAD_REQUEST
            || failure.status == StatusCode::REQUEST_TIMEOUT;
        let head_only = head.method == Method::HEAD;
        // A request whose body was never read leaves it in the buffer.
        let close = close || (route.is_none() && head.framing != RequestFraming::Empty);
        self.count(route, failure.status);
        self.write_problem(
            Problem::new(failure.status, failure.detail),
            &[],
            head_only,
            persistence(head, close),
        );
        if close {
            Next::Close
        } else {
            if route.is_none() {
                self.conn.rbuf.advance(head.len);
            }
            Next::KeepAlive
        }
    }

    /// Answers a request that reached no route (`Unrouted`); the
    /// connection goes on unless a body would have to be skipped or the
    /// request was refused as malformed.
    pub(in crate::session) fn answer_unrouted(&mut self, head: &Head, unrouted: Unrouted) -> Next {
        let (status, problem) = match unrouted {
            Unrouted::Asterisk => (StatusCode::NO_CONTENT, None),
            Unrouted::Problem {
                status,
                detail,
                allow,
            } => (status, Some((Problem::new(status, detail), allow))),
        };
        self.count(None, status);
        let close = head.framing != RequestFraming::Empty
            || !head.keep_alive
            || status == StatusCode::BAD_REQUEST;
        let head_only = head.method == Method::HEAD;
        let persistence = persistence(head, close);
        match problem {
            Some((problem, allow)) => {
                let allow = allow
                    .as_deref()
                    .map(|allow| (header::ALLOW.as_str(), allow));
                let extra: &[(&str, &str)] = match &allow {
                    Some(allow) => std::slice::from_ref(allow),
                    None => &[],
                };
                self.write_problem(problem, extra, head_only, persistence)
            }
            None => self.write_answer(status, &[], None, head_only, persistence),
        }
        if close {
            return Next::Close;
        }
        self.conn.rbuf.advance(head.len);
        Next::KeepAlive
    }

    /// Answers a request that could not be parsed, then closes.
    pub(in crate::session) async fn answer_failure(
        &mut self,
        route: Option<RouteId>,
        failure: Failure,
        head_only: bool,
        linger: bool,
    ) {
        self.count(route, failure.status);
        self.write_problem(
            Problem::new(failure.status, failure.detail),
            &[],
            head_only,
            Persistence::Close,
        );
        self.conn.close(linger).await;
    }

    pub(in crate::session) fn write_problem(
        &mut self,
        problem: Problem,
        extra: &[(&str, &str)],
        head_only: bool,
        persistence: Persistence,
    ) {
        let extra: Vec<(&[u8], &[u8])> = extra
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        let body = problem.to_json();
        self.write_answer(
            problem.status(),
            &extra,
            Some((&body, true)),
            head_only,
            persistence,
        );
    }

    /// Writes an answer of the proxy's own (a `body`, a problem+json one
    /// when `body.1`, or none), with `extra` fields and what the route's
    /// middleware adds to responses.
    pub(in crate::session) fn write_answer(
        &mut self,
        status: StatusCode,
        extra: &[(&[u8], &[u8])],
        body: Option<(&[u8], bool)>,
        head_only: bool,
        persistence: Persistence,
    ) {
        let (body, problem) = body.unwrap_or_default();
        self.outcome = Outcome {
            status,
            upstream: None,
            body_bytes: if head_only { 0 } else { body.len() as u64 },
        };
        let edits = self.response_edits(status);
        let content_type = (problem && !body.is_empty()).then_some((
            &b"content-type"[..],
            http1::problem::PROBLEM_JSON.as_bytes(),
        ));
        let fields = content_type
            .into_iter()
            .chain(extra.iter().copied())
            .filter(|(name, _)| !edits.as_ref().is_some_and(|e| e.drops(name)))
            .chain(edits.iter().flat_map(HeaderEdits::appended));
        http1::io::with_date(|date| {
            http1::encode_head(
                &mut self.conn.wbuf,
                status,
                fields,
                body.len(),
                date,
                persistence,
            );
        });
        self.put_back_edits(edits);
        if !head_only {
            self.conn.wbuf.extend_from_slice(body);
        }
    }

    /// Answers for a handler of the route's chain.
    pub(in crate::session) fn answer(
        &mut self,
        head: &Head,
        route: RouteId,
        answer: Answer,
    ) -> Next {
        self.count(Some(route), answer.status);
        // A body that has fully arrived can be skipped; otherwise the connection cannot go on.
        let body_here = match head.framing {
            RequestFraming::Empty => Some(0),
            RequestFraming::Length(len) if self.conn.rbuf.len() - head.len >= len => Some(len),
            _ => None,
        };
        let close = body_here.is_none() || !head.keep_alive;
        let problem = answer.body.is_none();
        let body = match answer.body {
            Some(body) => Some(body.to_vec()),
            None => answer.detail.map(|detail| {
                Problem::new(answer.status, detail)
                    .with_errors(answer.violations)
                    .to_json()
            }),
        };
        let extra: Vec<(&[u8], &[u8])> = answer
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        self.write_answer(
            answer.status,
            &extra,
            body.as_deref().map(|body| (body, problem)),
            head.method == Method::HEAD,
            persistence(head, close),
        );
        match body_here {
            Some(len) if !close => {
                self.conn.rbuf.advance(head.len + len);
                Next::KeepAlive
            }
            _ => Next::Close,
        }
    }
}
