//! Decoding an encoded field section (RFC 9204 4.5) onto flat fields.

use fieldcoding::{decode_int, decode_string};

use super::static_table::STATIC;
use crate::head::FieldSection;

/// Why a field section was not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionError {
    /// Its decoded size (names and values plus 32 per field, RFC 9114
    /// 4.2.2) passed the limit: 431 for a request head.
    TooLarge,
    /// QPACK_DECOMPRESSION_FAILED, a connection error: a dynamic table
    /// reference, a static index past the table, a truncated or bad
    /// representation.
    Failed(&'static str),
}

/// The bytes RFC 9114 4.2.2 adds to each field's name and value.
const FIELD_OVERHEAD: usize = 32;

/// Decodes `payload`, a HEADERS frame's whole payload, onto `out`, as
/// long as its decoded size stays within `max_size`.
pub fn decode_section(
    payload: &[u8],
    max_size: u64,
    out: &mut FieldSection,
) -> Result<(), SectionError> {
    let failed = SectionError::Failed;
    let max_size = usize::try_from(max_size).unwrap_or(usize::MAX);
    // The prefix: Required Insert Count, then the Base. With no dynamic
    // table the count must be 0 (RFC 9204 4.5.1.1); the Base is read and
    // has nothing to refer to.
    let (insert_count, a) = decode_int(payload, 8).map_err(|_| failed("a truncated prefix"))?;
    if insert_count != 0 {
        return Err(failed("a Required Insert Count without a dynamic table"));
    }
    let (_, b) = decode_int(&payload[a..], 7).map_err(|_| failed("a truncated prefix"))?;
    let mut rest = &payload[a + b..];
    let mut size = 0usize;
    while let Some(&first) = rest.first() {
        let budget = max_size.saturating_sub(size);
        let buf_start = out.mark();
        let used = if first & 0x80 != 0 {
            // Indexed field line: 1 T index(6).
            if first & 0x40 == 0 {
                return Err(failed("a dynamic table reference"));
            }
            let (index, used) = decode_int(rest, 6).map_err(|_| failed("a truncated index"))?;
            let (name, value) = entry(index)?;
            if name.len() + value.len() > budget {
                return Err(SectionError::TooLarge);
            }
            let buf = out.buf_mut();
            buf.extend_from_slice(name);
            buf.extend_from_slice(value);
            out.close_field(buf_start, name.len());
            used
        } else if first & 0x40 != 0 {
            // Literal with a name reference: 01 N T index(4), then the value.
            if first & 0x10 == 0 {
                return Err(failed("a dynamic table reference"));
            }
            let (index, used) = decode_int(rest, 4).map_err(|_| failed("a truncated index"))?;
            let (name, _) = entry(index)?;
            if name.len() > budget {
                return Err(SectionError::TooLarge);
            }
            out.buf_mut().extend_from_slice(name);
            let value = value(&rest[used..], out, budget - name.len())?;
            out.close_field(buf_start, name.len());
            used + value
        } else if first & 0x20 != 0 {
            // Literal with a literal name: 001 N H len(3), then the value.
            let name = decode_string(rest, 3, out.buf_mut(), budget).map_err(string_error)?;
            let name_len = out.buf_mut().len() - buf_start;
            let value = value(&rest[name..], out, budget - name_len)?;
            out.close_field(buf_start, name_len);
            name + value
        } else {
            // 0001: indexed post-base; 0000: literal with a post-base name.
            return Err(failed("a post-base (dynamic table) reference"));
        };
        size += out.buf_mut().len() - buf_start + FIELD_OVERHEAD;
        if size > max_size {
            return Err(SectionError::TooLarge);
        }
        rest = &rest[used..];
    }
    Ok(())
}

fn entry(index: u64) -> Result<(&'static [u8], &'static [u8]), SectionError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| STATIC.get(i))
        .copied()
        .ok_or(SectionError::Failed("a static index past the table"))
}

/// Decodes a value string onto the section's buffer: the bytes it took.
fn value(rest: &[u8], out: &mut FieldSection, budget: usize) -> Result<usize, SectionError> {
    decode_string(rest, 7, out.buf_mut(), budget).map_err(string_error)
}

fn string_error(err: fieldcoding::Error) -> SectionError {
    match err {
        fieldcoding::Error::TooLong => SectionError::TooLarge,
        fieldcoding::Error::Incomplete => SectionError::Failed("a truncated string"),
        fieldcoding::Error::IntegerOverflow => SectionError::Failed("a string length past 2^62"),
        fieldcoding::Error::Huffman => SectionError::Failed("a bad Huffman string"),
    }
}
