//! Layer 1: pure functions over request and response heads, the same for
//! every protocol. `normalize` gives a request target and Host the one
//! spelling routing and the upstream will see; `head` writes the heads
//! that cross the proxy (hop-by-hop fields dropped, `X-Forwarded-*`
//! added, framing re-emitted); `edits` carries the middleware's header
//! changes to those writers.

pub(crate) mod alt_svc;
pub(crate) mod edits;
pub(crate) mod fields;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod head;
pub(crate) mod http2;
pub(crate) mod interim;
pub(crate) mod location;
pub mod normalize;
pub mod proxy_protocol;
pub(crate) mod traceparent;
pub(crate) mod trailers;
