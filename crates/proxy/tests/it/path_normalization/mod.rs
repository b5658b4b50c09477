//! Gateway integrity (issue 15): no spelling of a guarded resource walks
//! around its route's chain. A route for `/admin` denies everyone; a
//! catch-all route lets everything else through to an upstream that
//! resolves paths as leniently as common frameworks do. Every spelling is
//! sent over HTTP/1.1 and over HTTP/2, on real sockets; the test fails if
//! the upstream ever resolves a request to `/admin`. Host forms and
//! absolute-form targets likewise.
//!
//! One module for path spellings, one for host and target forms, one for
//! the `paths:` settings and routes in normal form.

mod hosts;
mod settings;
mod spellings;
