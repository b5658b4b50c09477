//! The strict HTTP/1.1 wire code shared by the sluice proxy and backends:
//! pure parsers and encoders over byte slices (fuzzed, see fuzz/), plus the
//! few socket helpers both servers need.
//!
//! Written by hand rather than taken from hyper because both servers must
//! answer every malformed request with a problem+json body, batch
//! pipelined answers into one write, and stream bodies through bounded
//! buffers; see docs/LIFECYCLE-backends.md and docs/LIFECYCLE-proxy.md.

pub mod chunked;
pub mod conn;
pub mod io;
pub mod problem;
pub mod request;
pub mod response;

pub use chunked::{ChunkedDecoder, Decoded, Part};
pub use problem::{Problem, Violation};
pub use request::{
    head_arrived, parse_head, parse_head_into, Field, FieldSink, Framing, Head, Limits, Rejection,
};
pub use response::{
    encode_head, may_have_body, parse_response_head, BodyFraming, Persistence, ResponseHead,
};
