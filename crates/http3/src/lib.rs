//! sluice's HTTP/3 server codec (RFC 9114) over quinn's QUIC.
//!
//! The wire format is decoded without I/O and fuzzed that way: frames
//! ([`frame`]), QPACK without a dynamic table ([`qpack`]), a request
//! stream ([`request::RequestDecoder`]), the client's control and QPACK
//! streams ([`control`], [`qpack::EncoderStream`]). Request heads come out
//! as flat fields ([`head`]) checked against the rules every HTTP version
//! shares, so a malformed request never leaves the codec. [`server`] runs
//! them over a quinn connection.
//!
//! Written for sluice rather than taken from the `h3` crate, which let
//! pseudo-headers after regular fields, a repeated `:path`, a second full
//! head taken as trailers and frames after trailers through, never read a
//! client's QPACK encoder stream, and hands requests out as `http` types
//! that the proxy then took apart again (docs/LIFECYCLE-h3.md).

pub mod control;
mod error;
pub mod frame;
pub mod qpack;
pub mod request;
pub mod server;
pub mod varint;

pub use error::{Code, Error};
/// Flat heads and the request rules (shared with HTTP/2).
pub use fieldcoding::head;
