//! sluice's HTTP/2 codec (RFC 9113), without I/O: frames and HPACK now;
//! the connection state machines of both sides are built on them (issue
//! 45). Heads come out as flat fields (`fieldcoding::head`), checked by the
//! rules HTTP/2 shares with HTTP/3.

pub mod conn;
mod error;
pub mod frame;
pub mod hpack;

pub use conn::{Config, Connection, Event, Role, MAX_INTERIM_HEADS};
pub use error::{Error, Reason};

pub use fieldcoding::head;
