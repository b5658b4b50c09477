//! `sluice load` against real servers on loopback, one test binary with a
//! module per behaviour (one link instead of five): HTTP/1.1, HTTP/2 and
//! HTTP/3 runs, the open model's pacing, and the users model. The tests run
//! as threads of one process, as many at once as before (the test
//! harness's default, one per core).

mod accounting;
mod http1;
mod http2;
mod http3;
mod pacing;
mod support;
mod users;
