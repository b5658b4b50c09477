//! The backends' integration tests, one binary (linkerd2-proxy's pattern):
//! each module is one backend or one part of the serving engine, over real
//! loopback sockets (testkit starts them on port 0).

mod customers;
mod downstream;
mod graceful_shutdown;
mod http1_engine;
mod http2_and_tls;
mod passthrough;
mod petstore;
mod static_body;
