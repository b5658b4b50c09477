//! Routing (issue 46): matches and their precedence, filters (header
//! changes, redirects, rewrites, direct responses, mirrors), weighted
//! backends, per-route timeouts and retries, the same for every client
//! protocol; and the Gateway API conformance tables.

mod conformance;
mod hostile;
mod policies;
mod protocols;
