//! The integration tests of the openapi crate as one binary (one link, one
//! run), a module per behaviour; each module says what it covers. Specs come
//! from `specs/` and `tests/data/`, found through `CARGO_MANIFEST_DIR`.

mod rejected_specs;
mod requests;
mod responses;
mod schemas;
