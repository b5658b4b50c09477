//! The HTTP/2 codec's integration tests, one binary.

#![allow(clippy::unwrap_used)]

mod hpack_stories;
mod interop;
