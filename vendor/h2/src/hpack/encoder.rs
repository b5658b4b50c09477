//! HPACK encoding for what a proxy forwards (sluice fork, vendor/h2/SLUICE.md).
//!
//! Upstream h2 hashes, probes and inserts every field it sends into a
//! dynamic table. A proxy forwards fields that mostly differ per request
//! (paths, dates, ids, lengths), so the table rarely pays for its cost:
//! callgrind put it at 15% of a proxied HTTP/2 request. As nginx and
//! HAProxy do, this encoder keeps no dynamic table: a field is a static
//! table index when name and value are there, otherwise a literal without
//! indexing (never-indexed for sensitive values) with the static name
//! index when there is one. Strings go as they are (HAProxy), or, with
//! `set_huffman(true)`, Huffman-coded when that is shorter (nginx): the
//! code costs about 9 instructions a byte and saves about a quarter of
//! the bytes. Size updates the peer's SETTINGS call for are still sent.

use super::table::index_static;
use super::{huffman, Header};

use bytes::{BufMut, BytesMut};
use http::header::HeaderName;

const DEFAULT_MAX_ALLOWED_SIZE: usize = 4 * 1024;

#[derive(Debug)]
pub struct Encoder {
    /// The dynamic table size the peer's decoder has been told of; the
    /// table itself stays empty.
    table_size: usize,
    max_allowed_size: usize,
    size_update: Option<SizeUpdate>,
    /// Huffman-code strings where that is shorter; otherwise as they are.
    huffman: bool,
}

#[derive(Debug, Copy, Clone, Eq, PartialEq)]
enum SizeUpdate {
    One(usize),
    Two(usize, usize), // min, max
}

/// How the previous field named itself, for a value of the same name.
enum LastName {
    Static(usize),
    Literal(Header),
}

impl Encoder {
    pub fn new(max_size: usize, _capacity: usize) -> Encoder {
        let max_size = max_size.min(DEFAULT_MAX_ALLOWED_SIZE);

        Encoder {
            table_size: max_size,
            max_allowed_size: DEFAULT_MAX_ALLOWED_SIZE,
            size_update: None,
            huffman: false,
        }
    }

    #[cfg(test)]
    fn set_max_allowed_size(&mut self, max: usize) {
        self.max_allowed_size = max;

        if self.table_size > max {
            self.update_max_size(max);
        }
    }

    /// Huffman-code strings where that is shorter (off: as they are).
    pub fn set_huffman(&mut self, enabled: bool) {
        self.huffman = enabled;
    }

    /// Queues a max size update.
    ///
    /// The next call to `encode` will include a dynamic size update frame.
    pub fn update_max_size(&mut self, val: usize) {
        let val = val.min(self.max_allowed_size);

        match self.size_update {
            Some(SizeUpdate::One(old)) => {
                if val > old {
                    if old > self.table_size {
                        self.size_update = Some(SizeUpdate::One(val));
                    } else {
                        self.size_update = Some(SizeUpdate::Two(old, val));
                    }
                } else {
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
            Some(SizeUpdate::Two(min, _)) => {
                if val < min {
                    self.size_update = Some(SizeUpdate::One(val));
                } else {
                    self.size_update = Some(SizeUpdate::Two(min, val));
                }
            }
            None => {
                if val != self.table_size {
                    // Don't bother writing a frame if the value already matches
                    // the table's max size.
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
        }
    }

    /// Encode a set of headers into the provided buffer
    pub fn encode<I>(&mut self, headers: I, dst: &mut BytesMut)
    where
        I: IntoIterator<Item = Header<Option<HeaderName>>>,
    {
        self.encode_size_updates(dst);

        let mut last = None;
        for header in headers {
            match header.reify() {
                Ok(header) => last = Some(encode_field(header, self.huffman, dst)),
                // The same name as the previous field.
                Err(value) => match last.as_ref() {
                    Some(LastName::Static(idx)) => encode_not_indexed(
                        *idx,
                        value.as_ref(),
                        value.is_sensitive(),
                        self.huffman,
                        dst,
                    ),
                    Some(LastName::Literal(header)) => encode_not_indexed2(
                        header.name().as_slice(),
                        value.as_ref(),
                        value.is_sensitive(),
                        self.huffman,
                        dst,
                    ),
                    None => panic!(
                        "encoding header without name, but no previous index to use for name"
                    ),
                },
            }
        }
    }

    fn encode_size_updates(&mut self, dst: &mut BytesMut) {
        match self.size_update.take() {
            Some(SizeUpdate::One(val)) => {
                self.table_size = val;
                encode_size_update(val, dst);
            }
            Some(SizeUpdate::Two(min, max)) => {
                self.table_size = max;
                encode_size_update(min, dst);
                encode_size_update(max, dst);
            }
            None => {}
        }
    }
}

/// One named field: a static index, or a literal that is not indexed.
fn encode_field(header: Header, huffman: bool, dst: &mut BytesMut) -> LastName {
    match index_static(&header) {
        Some((idx, true)) if !header.is_sensitive() => {
            encode_int(idx, 7, 0x80, dst);
            LastName::Static(idx)
        }
        Some((idx, _)) => {
            encode_not_indexed(
                idx,
                header.value_slice(),
                header.is_sensitive(),
                huffman,
                dst,
            );
            LastName::Static(idx)
        }
        None => {
            encode_not_indexed2(
                header.name().as_slice(),
                header.value_slice(),
                header.is_sensitive(),
                huffman,
                dst,
            );
            LastName::Literal(header)
        }
    }
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(4096, 0)
    }
}

fn encode_size_update(val: usize, dst: &mut BytesMut) {
    encode_int(val, 5, 0b0010_0000, dst)
}

fn encode_not_indexed(
    name: usize,
    value: &[u8],
    sensitive: bool,
    huffman: bool,
    dst: &mut BytesMut,
) {
    if sensitive {
        encode_int(name, 4, 0b10000, dst);
    } else {
        encode_int(name, 4, 0, dst);
    }

    encode_str(value, huffman, dst);
}

fn encode_not_indexed2(
    name: &[u8],
    value: &[u8],
    sensitive: bool,
    huffman: bool,
    dst: &mut BytesMut,
) {
    if sensitive {
        dst.put_u8(0b10000);
    } else {
        dst.put_u8(0);
    }

    encode_str(name, huffman, dst);
    encode_str(value, huffman, dst);
}

/// A string literal (RFC 7541 5.2): with `huffman`, Huffman-coded when
/// that is shorter; otherwise as it is.
fn encode_str(val: &[u8], huffman: bool, dst: &mut BytesMut) {
    let len = val.len();
    if !huffman {
        encode_int(len, 7, 0, dst);
        dst.put_slice(val);
        return;
    }
    if len == 0 {
        dst.put_u8(0);
        return;
    }
    if len < 127 {
        // One pass: a one-byte length, then the code, given up as soon as
        // it is no shorter than the string.
        let start = dst.len();
        dst.resize(start + 1 + len + 4, 0);
        match huffman::encode_shorter(val, &mut dst[start + 1..], len) {
            Some(n) => {
                dst[start] = 0x80 | n as u8;
                dst.truncate(start + 1 + n);
            }
            None => {
                dst[start] = len as u8;
                dst[start + 1..start + 1 + len].copy_from_slice(val);
                dst.truncate(start + 1 + len);
            }
        }
        return;
    }
    let huff_len = huffman::encoded_len(val);
    if huff_len < len {
        encode_int(huff_len, 7, 0x80, dst);
        huffman::encode(val, dst);
    } else {
        encode_int(len, 7, 0, dst);
        dst.put_slice(val);
    }
}

/// Encode an integer into the given destination buffer
fn encode_int<B: BufMut>(
    mut value: usize,   // The integer to encode
    prefix_bits: usize, // The number of bits in the prefix
    first_byte: u8,     // The base upon which to start encoding the int
    dst: &mut B,
) {
    if encode_int_one_byte(value, prefix_bits) {
        dst.put_u8(first_byte | value as u8);
        return;
    }

    let low = (1 << prefix_bits) - 1;

    value -= low;

    dst.put_u8(first_byte | low as u8);

    while value >= 128 {
        dst.put_u8(0b1000_0000 | value as u8);

        value >>= 7;
    }

    dst.put_u8(value as u8);
}

/// Returns true if the in the int can be fully encoded in the first byte.
fn encode_int_one_byte(value: usize, prefix_bits: usize) -> bool {
    value < (1 << prefix_bits) - 1
}



#[cfg(test)]
mod test {
    use super::*;
    use crate::hpack::Decoder;
    use http::*;
    use std::io::Cursor;
    use std::ops::ControlFlow;

    #[test]
    fn static_fields_are_one_byte() {
        let mut encoder = huffman_encoder();
        assert_eq!(*encode(&mut encoder, vec![method("GET")]), [0x80 | 2]);
        assert_eq!(*encode(&mut encoder, vec![method("POST")]), [0x80 | 3]);
        let status = Header::Status(StatusCode::OK);
        assert_eq!(*encode(&mut encoder, vec![status]), [0x80 | 8]);
    }

    #[test]
    fn other_fields_are_literals_without_indexing_every_time() {
        let mut encoder = huffman_encoder();
        // PATCH is not shorter in Huffman (34 bits): a raw string.
        let patch = encode(&mut encoder, vec![method("PATCH")]);
        assert_eq!(*patch, [2, 5, b'P', b'A', b'T', b'C', b'H']);
        // A static name (content-language, 27) with a Huffman value.
        let res = encode(&mut encoder, vec![header("content-language", "foo")]);
        assert_eq!(&[15, 27 - 15, 0x80 | 2], &res[..3]);
        assert_eq!("foo", huff_decode(&res[3..]));
        // A new name, sent the same way each time: nothing is indexed.
        let first = encode(&mut encoder, vec![header("foo", "hello")]);
        assert_eq!(&[0, 0x80 | 2], &first[..2]);
        assert_eq!("foo", huff_decode(&first[2..4]));
        assert_eq!(0x80 | 4, first[4]);
        assert_eq!("hello", huff_decode(&first[5..]));
        assert_eq!(first, encode(&mut encoder, vec![header("foo", "hello")]));
        assert_eq!(patch, encode(&mut encoder, vec![method("PATCH")]));
    }

    #[test]
    fn sensitive_values_are_never_indexed() {
        let mut encoder = huffman_encoder();
        let mut value = HeaderValue::from_static("secret");
        value.set_sensitive(true);
        let res = encode(
            &mut encoder,
            vec![Header::Field {
                name: Some(header::AUTHORIZATION),
                value,
            }],
        );
        // Never indexed (0001), name index 23 (15 + 8).
        assert_eq!(&[0b1_0000 | 15, 8], &res[..2]);
    }

    #[test]
    fn size_updates_are_still_sent() {
        let mut encoder = huffman_encoder();
        assert!(encoder.size_update.is_none());
        encoder.update_max_size(4096);
        assert!(encoder.size_update.is_none(), "the default size");
        encoder.update_max_size(0);
        assert_eq!(Some(SizeUpdate::One(0)), encoder.size_update);
        encoder.update_max_size(100);
        assert_eq!(Some(SizeUpdate::Two(0, 100)), encoder.size_update);
        let res = encode(&mut encoder, vec![method("GET")]);
        assert_eq!(&[32, 32 | 31, 69, 0x80 | 2], &res[..]);
        assert!(encoder.size_update.is_none());

        let mut encoder = huffman_encoder();
        encoder.set_max_allowed_size(8000);
        encoder.update_max_size(8000);
        assert_eq!(Some(SizeUpdate::One(8000)), encoder.size_update);
        encoder.update_max_size(50);
        assert_eq!(Some(SizeUpdate::One(50)), encoder.size_update);
    }

    #[test]
    fn a_value_without_a_name_takes_the_previous_name() {
        let mut encoder = huffman_encoder();
        let res = encode(
            &mut encoder,
            vec![
                header("x-hello", "a"),
                Header::Field {
                    name: None,
                    value: HeaderValue::from_static("b"),
                },
                header("accept", "c"),
                Header::Field {
                    name: None,
                    value: HeaderValue::from_static("d"),
                },
            ],
        );
        let decoded = decode(res);
        let names: Vec<_> = decoded.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(names, ["x-hello=a", "x-hello=b", "accept=c", "accept=d"]);
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_fields() {
        let mut encoder = huffman_encoder();
        let long = "v".repeat(300);
        let fields = vec![
            method("DELETE"),
            Header::Path(crate::hpack::BytesStr::from("/v1/pets?limit=10")),
            header("content-type", "application/json"),
            header("x-request-id", "0af7651916cd43dd8448eb211c80319c"),
            header("x-long", &long),
            header("x-empty", ""),
            header("x-bytes", "~!\"#"),
        ];
        let decoded = decode(encode(&mut encoder, fields));
        let expected = [
            (":method", "DELETE"),
            (":path", "/v1/pets?limit=10"),
            ("content-type", "application/json"),
            ("x-request-id", "0af7651916cd43dd8448eb211c80319c"),
            ("x-long", long.as_str()),
            ("x-empty", ""),
            ("x-bytes", "~!\"#"),
        ];
        assert_eq!(decoded.len(), expected.len());
        for ((name, value), (want_name, want_value)) in decoded.iter().zip(expected) {
            assert_eq!((name.as_str(), value.as_str()), (want_name, want_value));
        }
    }

    fn huffman_encoder() -> Encoder {
        let mut encoder = Encoder::default();
        encoder.set_huffman(true);
        encoder
    }

    #[test]
    fn strings_go_as_they_are_by_default() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header("x-id", "abc"), method("GET")]);
        assert_eq!(*res, [0, 4, b'x', b'-', b'i', b'd', 3, b'a', b'b', b'c', 0x80 | 2]);
        let long = "a".repeat(200);
        let res = encode(&mut encoder, vec![header("content-type", &long)]);
        // Name index 31 (15 + 16), then a length of 200 on 7 bits (127 + 73).
        assert_eq!(&[15, 16, 127, 73], &res[..4]);
        assert_eq!(&res[4..], long.as_bytes());
        assert_eq!(decode(res)[0].1, long);
    }

    fn decode(mut block: BytesMut) -> Vec<(String, String)> {
        let mut decoder = Decoder::new(4096);
        let mut out = Vec::new();
        decoder
            .decode(&mut Cursor::new(&mut block), |header| {
                let name = match header.name() {
                    crate::hpack::header::Name::Field(name) => name.to_string(),
                    other => String::from_utf8(other.as_slice().to_vec()).unwrap(),
                };
                let value = String::from_utf8(header.value_slice().to_vec()).unwrap();
                out.push((name, value));
                ControlFlow::Continue(())
            })
            .unwrap();
        out
    }

    fn encode(e: &mut Encoder, hdrs: Vec<Header<Option<HeaderName>>>) -> BytesMut {
        let mut dst = BytesMut::with_capacity(1024);
        e.encode(hdrs, &mut dst);
        dst
    }

    fn method(s: &str) -> Header<Option<HeaderName>> {
        Header::Method(Method::from_bytes(s.as_bytes()).unwrap())
    }

    fn header(name: &str, val: &str) -> Header<Option<HeaderName>> {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        let value = HeaderValue::from_bytes(val.as_bytes()).unwrap();

        Header::Field {
            name: Some(name),
            value,
        }
    }

    fn huff_decode(src: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        huffman::decode(src, &mut buf).unwrap()
    }
}
