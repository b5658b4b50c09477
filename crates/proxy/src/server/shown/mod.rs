//! What `/config` shows: the configuration serialised by its own types
//! (`effective`), then what must not be shown hidden (`redact`). Apart
//! from `admin`, which serves the document, and `reload`, which renders
//! it at each load, so that neither imports the other.

mod effective;
mod redact;

pub(crate) use effective::effective;
pub use effective::shown;
pub(crate) use redact::redact;
