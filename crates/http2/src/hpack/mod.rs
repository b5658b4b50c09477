//! HPACK (RFC 7541): a decoder with the dynamic table the peer's encoder
//! fills, and an encoder that keeps none.

mod decode;
mod encode;
mod static_table;
mod table;

pub use decode::{DecodeError, Decoder};
pub use encode::{encode_field, encode_request, encode_response};
