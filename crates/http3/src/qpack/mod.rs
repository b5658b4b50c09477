//! QPACK (RFC 9204) without a dynamic table. sluice advertises
//! SETTINGS_QPACK_MAX_TABLE_CAPACITY 0, so a client may refer only to the
//! static table and to literals: every dynamic reference, and every
//! instruction on the client's encoder stream but a capacity of 0, is an
//! error. What sluice sends uses the static table and literals only, so it
//! opens no encoder or decoder stream of its own (RFC 9204 4.2 allows it).

mod decode;
mod encode;
mod instructions;
mod static_table;

pub use decode::{decode_section, SectionError};
pub use encode::{encode_response, encode_section};
pub use instructions::{DecoderStream, EncoderStream};
