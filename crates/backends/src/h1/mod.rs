//! A lean HTTP/1.1 server for the backends.
//!
//! Why not hyper: the backends must out-serve nginx under pipelined load, and
//! hyper only batches pipelined responses with `pipeline_flush`, which drops
//! everything still buffered when a connection closes with unread input (a
//! malformed request after valid ones gets neither the earlier answers nor a
//! 400). This server parses every complete request in the read buffer,
//! answers each in order into one write buffer and flushes once per batch;
//! every rejection is a problem+json response. See docs/LIFECYCLE-backends.md.

mod conn;

pub(crate) use conn::{
    request_timeout, serve_connection, H2c, IDLE_TIMEOUT, LIMITS, REQUEST_TIMEOUT, WRITE_TIMEOUT,
};
