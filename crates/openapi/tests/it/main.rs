//! The integration tests of the openapi crate as one binary (one link, one
//! run), a module per behaviour; each module says what it covers. Specs come
//! from `specs/` and `tests/data/`, found through `CARGO_MANIFEST_DIR`.

mod hostile_input;
mod rejected_specs;
mod requests;
mod response_compilation;
mod responses;
mod schemas;

use openapi::{Outcome, Violation};

/// The violations of an [`Outcome::Invalid`]; anything else fails the test.
fn violations(outcome: Outcome<'_>) -> Vec<Violation> {
    match outcome {
        Outcome::Invalid(violations) => violations,
        other => panic!("expected violations, got {other:?}"),
    }
}

/// The pointers of [`violations`], in order.
fn pointers(outcome: Outcome<'_>) -> Vec<String> {
    violations(outcome).into_iter().map(|v| v.pointer).collect()
}
