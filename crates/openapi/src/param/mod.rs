//! Parameters: compiled from the spec into hand-written checks for the
//! common primitive shapes, or into a JSON Schema check on a coerced value
//! for the rest.
//!
//! Modules, each using only those listed before it: `types` (primitive
//! types, reading text as them), `scalar` (the hand checks), `model` (a
//! compiled parameter), `style` (array layouts), `keywords` (reading schema
//! keywords), `compile` (Parameter Object to parameter).

mod compile;
mod keywords;
mod model;
mod scalar;
mod style;
mod types;

pub(crate) use compile::{compile, Compiled};
pub(crate) use model::{check_collected, In, Layout, Param, Shape};
pub(crate) use style::split_items;
