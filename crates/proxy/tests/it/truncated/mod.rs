//! Bodies that break off (issue 51): a request body the client resets
//! mid-way never reaches an upstream as a whole request, and a response
//! body the upstream breaks off reaches the client as an error (a reset,
//! or a connection closed before the body's end), never as a short
//! success; for each client protocol and each upstream protocol.

mod requests;
mod responses;

/// Body bytes sent before the break.
const SENT: usize = 4000;
/// The content-length a body that breaks off declares, when it has one.
const DECLARED: usize = 2 * SENT;
