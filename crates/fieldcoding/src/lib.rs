//! What HTTP/2 and HTTP/3 share about field sections: heads as flat
//! fields and the rules that make a request head well-formed ([`head`],
//! RFC 9113 8.2-8.3 and RFC 9114 4.2-4.3 say the same), and what HPACK
//! (RFC 7541) and QPACK (RFC 9204) spell alike: prefixed integers, string
//! literals and the Huffman code. Each codec keeps its own static table
//! and instructions.
//!
//! Every decoder takes the bytes it has and says `Incomplete` when they
//! end too soon, so a caller may decode a frame it holds whole (a header
//! block) or an instruction stream that arrives in pieces (QPACK's
//! encoder stream), and never reads past what it was given.

pub mod head;
mod huffman;
mod huffman_table;
mod int;
mod string;

pub use huffman::{decode as huffman_decode, encode as huffman_encode, encoded_len};
pub use int::{decode as decode_int, encode as encode_int};
pub use string::{decode as decode_string, encode as encode_string};

/// Why a field-section primitive could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The bytes end inside it: more must come (or, where the input is
    /// whole, it is truncated).
    Incomplete,
    /// A prefixed integer past 2^62 - 1, the largest either format uses.
    IntegerOverflow,
    /// A Huffman string with EOS in it, padding longer than 7 bits or not
    /// all ones (RFC 7541 5.2).
    Huffman,
    /// A string longer than the caller allowed.
    TooLong,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Incomplete => "truncated",
            Self::IntegerOverflow => "an integer past 2^62",
            Self::Huffman => "a Huffman string that is not valid",
            Self::TooLong => "a string longer than allowed",
        })
    }
}

impl std::error::Error for Error {}
