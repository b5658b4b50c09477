//! Parameters: compiled from the spec into hand-written checks for the
//! common primitive shapes, or into a JSON Schema check on a coerced value
//! for the rest.

mod compile;
mod keywords;
mod model;
mod scalar;
mod style;
mod types;

pub(crate) use compile::{compile, Compiled};
pub(crate) use model::{check_collected, In, Layout, Param, Shape};
pub(crate) use style::split_items;
