//! The loop over a scripted wire, without sockets: which host and
//! connection each attempt gets, which answer or failure stands.

use std::{collections::VecDeque, net::SocketAddr, path::Path, sync::Arc};

use super::to_upstream::{ClientSide, UpstreamProtocol};
use super::*;
use crate::{
    ids::UpstreamId,
    plan::{Plan, Plans, WorkerPlan},
    session::{ParkingLot, Worker},
    telemetry::Metrics,
    upstream::{h2_pool::H2Pool, pool::Pool},
};
use http::{Method, StatusCode};
use std::future::Future;

/// What one attempt of the script comes to.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// No connection: 502 refused, 504 timed out, 503 none free in time.
    NoConnection(u16),
    /// The client went away while the connection was awaited (499).
    ClientGone,
    Answer(u16),
    Stale,
    Refused,
    Reset,
    /// Failed for good (a timeout, a broken head, a client reset: 499).
    Final(u16),
}

/// A wire that plays `steps`, one per attempt, and notes what it was asked.
struct Scripted {
    steps: VecDeque<Step>,
    /// (host, a new connection only) of each attempt.
    attempts: Vec<(usize, bool)>,
    /// Connections closed, and of those with an answer dropped.
    closed: usize,
    discarded: usize,
}

fn failure(status: u16) -> Failure {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    Failure::new(status, "scripted")
}

/// No pooled connection: each attempt takes the script's next step
/// (`Scripted::connect`).
impl UpstreamProtocol for Scripted {
    type Conn = Step;

    fn pooled(_: &Hosts<'_>, _: HostId, _: bool, _: Instant) -> Option<Step> {
        None
    }

    fn connect(
        _: &Hosts<'_>,
        _: HostId,
        _: bool,
    ) -> impl Future<Output = Result<Step, Failure>> + Send {
        std::future::ready(Err(failure(599)))
    }
}

/// A client that never goes away (the script says when it does).
impl ClientSide for Scripted {
    fn now(&self) -> Instant {
        Instant::now()
    }

    async fn unless_gone<F: Future + Send>(&mut self, work: F) -> Result<F::Output, Failure> {
        Ok(work.await)
    }

    fn interim(
        &mut self,
        _: StatusCode,
        _: crate::wire::fields::Fields<'_>,
    ) -> Result<(), crate::wire::interim::TooMany> {
        Ok(())
    }
}

impl ToUpstream for Scripted {
    type Conn = Step;
    type Head = StatusCode;
    type Upstream = Scripted;
    type Client = Scripted;

    fn client(&mut self) -> &mut Scripted {
        self
    }

    async fn connect(
        &mut self,
        _hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> Result<Result<Step, Failure>, Failure> {
        self.attempts.push((host.index(), fresh_only));
        match self.steps.pop_front() {
            Some(Step::NoConnection(status)) => Ok(Err(failure(status))),
            Some(Step::ClientGone) => Err(failure(499)),
            Some(step) => Ok(Ok(step)),
            None => Err(failure(599)),
        }
    }

    async fn send(
        &mut self,
        _hosts: &Hosts<'_>,
        _host: HostId,
        step: &mut Step,
        _sent_at: Instant,
    ) -> Result<StatusCode, Failed> {
        match *step {
            Step::Answer(status) => Ok(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)),
            Step::Stale => Err(Failed::Stale),
            Step::Refused => Err(Failed::Refused),
            Step::Reset => Err(Failed::Reset(failure(502))),
            Step::Final(status) => Err(Failed::Final(failure(status))),
            Step::NoConnection(_) | Step::ClientGone => Err(Failed::Final(failure(599))),
        }
    }

    fn traceparent(&mut self, _value: &[u8; 55]) {}

    fn status(head: &StatusCode) -> StatusCode {
        *head
    }

    fn close(&mut self, _: Step, head: Option<StatusCode>) {
        self.closed += 1;
        self.discarded += usize::from(head.is_some());
    }
}

/// A plan with upstream `two` of two hosts and `settings`, and its worker.
fn plan_and_worker(settings: &str) -> (Arc<Plan>, Worker) {
    let text = format!(
        "listeners: [{{ address: 127.0.0.1:1 }}]\nupstreams:\n  two:\n    hosts: [\"http://127.0.0.1:2\", \"http://127.0.0.1:3\"]\n    retry_backoff: 1ms\n{settings}routes: [{{ path: /, upstream: two }}]\n"
    );
    let config = crate::config::parse(&text, Path::new("t.yaml"), |_| None).unwrap();
    let plan = Arc::new(Plan::compile(&config, 1).unwrap());
    let (parking, _poll) = ParkingLot::new().unwrap();
    let (unparked, _) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker {
        plans: WorkerPlan::new(Arc::new(Plans::new(Arc::clone(&plan)))),
        metrics: Arc::new(Metrics::new(1)),
        index: 0,
        pool: Pool::new(0),
        h2_pool: H2Pool::new(0),
        parking,
        unparked,
    };
    (plan, worker)
}

#[tokio::test(start_paused = true)]
async fn the_loop_in_a_table() {
    use Step::*;
    let listed = "    retries: 2\n    retry_on: [connect_failure, reset, 503]\n";
    let none = "    retries: 0\n";
    // (why, settings, method, body in hand, steps, [(host, fresh only)],
    //  answers discarded, what stands: Ok(status) answered, Err(status) failed)
    type Row<'a> = (
        &'a str,
        &'a str,
        Method,
        bool,
        &'a [Step],
        &'a [(usize, bool)],
        usize,
        Result<u16, u16>,
    );
    let table: &[Row<'_>] = &[
        (
            "an answer stands",
            listed,
            Method::GET,
            true,
            &[Answer(200)],
            &[(0, false)],
            0,
            Ok(200),
        ),
        (
            "a listed status: the answer is dropped, the next host asked",
            listed,
            Method::GET,
            true,
            &[Answer(503), Answer(200)],
            &[(0, false), (1, false)],
            1,
            Ok(200),
        ),
        (
            "a listed status of a POST stands",
            listed,
            Method::POST,
            true,
            &[Answer(503)],
            &[(0, false)],
            0,
            Ok(503),
        ),
        (
            "an early answer (the body was still going up) stands",
            listed,
            Method::GET,
            false,
            &[Answer(503)],
            &[(0, false)],
            0,
            Ok(503),
        ),
        (
            "a stale connection: the same host, on a new connection",
            none,
            Method::GET,
            true,
            &[Stale, Answer(200)],
            &[(0, false), (0, true)],
            0,
            Ok(200),
        ),
        (
            "stale twice: the upstream closed before answering",
            none,
            Method::GET,
            true,
            &[Stale, Stale],
            &[(0, false), (0, true)],
            0,
            Err(502),
        ),
        (
            "a refused stream: the same host again",
            "    retries: 1\n",
            Method::POST,
            true,
            &[Refused, Answer(200)],
            &[(0, false), (0, false)],
            0,
            Ok(200),
        ),
        (
            "a listed reset: the next host",
            listed,
            Method::GET,
            true,
            &[Reset, Answer(200)],
            &[(0, false), (1, false)],
            0,
            Ok(200),
        ),
        (
            "an unlisted reset stands",
            "    retries: 2\n",
            Method::GET,
            true,
            &[Reset],
            &[(0, false)],
            0,
            Err(502),
        ),
        (
            "a failed connect: the next host, for any request",
            "    retries: 1\n",
            Method::POST,
            false,
            &[NoConnection(502), Answer(200)],
            &[(0, false), (1, false)],
            0,
            Ok(200),
        ),
        (
            "no connection free in time (503) stands",
            listed,
            Method::GET,
            true,
            &[NoConnection(503)],
            &[(0, false)],
            0,
            Err(503),
        ),
        (
            "a client gone while its connection is awaited: nothing more",
            listed,
            Method::GET,
            true,
            &[ClientGone],
            &[(0, false)],
            0,
            Err(499),
        ),
        (
            "a client reset (or a timeout) while the answer is awaited stands",
            listed,
            Method::GET,
            true,
            &[Final(499)],
            &[(0, false)],
            0,
            Err(499),
        ),
    ];
    let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
    for (why, settings, method, in_hand, steps, attempts, discarded, stands) in table {
        let (plan, worker) = plan_and_worker(settings);
        let upstream = UpstreamId::new(0);
        let hosts = Hosts::new(&plan, &worker, upstream, peer);
        let mut wire = Scripted {
            steps: steps.iter().copied().collect(),
            attempts: Vec::new(),
            closed: 0,
            discarded: 0,
        };
        let mut retries = Retries::new(plan.upstream(upstream).retries, method, *in_hand);
        let got = run(&mut wire, &hosts, HostId::new(0), &mut retries).await;
        let got = got
            .map(|answered| answered.head.as_u16())
            .map_err(|failure| failure.status.as_u16());
        assert_eq!(got, *stands, "{why}");
        assert_eq!(wire.attempts, *attempts, "{why}: attempts");
        assert_eq!(wire.discarded, *discarded, "{why}: answers dropped");
        // Every connection but the one of an answer that stands is closed.
        let connected = attempts.len()
            - steps
                .iter()
                .filter(|s| matches!(s, NoConnection(_) | ClientGone))
                .count();
        let kept = usize::from(got.is_ok());
        assert_eq!(wire.closed, connected - kept, "{why}: connections closed");
        assert!(wire.steps.is_empty(), "{why}: steps left");
    }
}
