//! Decoding a header block (RFC 7541 3, 6) onto flat fields, with the
//! dynamic table the peer's encoder fills.

use fieldcoding::{decode_int, decode_string, head::FieldSection};

use super::{
    static_table::STATIC,
    table::{entry_size, Table},
};

/// Why a header block was not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// COMPRESSION_ERROR, a connection error (RFC 9113 4.3): an index
    /// that names nothing, a bad string, a table size past the limit, a
    /// truncated representation. The decoder's state is lost with it.
    Compression(&'static str),
    /// The decoded list passed the limit (names and values plus 32 per
    /// field, RFC 9113 6.5.2): 431 for a request. The block was decoded
    /// to its end, so the dynamic table is in step for the next one; the
    /// fields of this block were dropped.
    TooLarge,
}

/// One connection's HPACK decoder.
#[derive(Debug)]
pub struct Decoder {
    table: Table,
    /// The SETTINGS_HEADER_TABLE_SIZE this side advertised: the largest
    /// table a size update may ask for.
    max_table: usize,
}

impl Decoder {
    /// A decoder for a peer told SETTINGS_HEADER_TABLE_SIZE `max_table`
    /// (4096 unless this side advertised another value).
    pub fn new(max_table: usize) -> Self {
        Self {
            table: Table::new(max_table),
            max_table,
        }
    }

    /// The dynamic table's size now (RFC 7541 4.1).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Decodes a whole header block onto `out`, as long as the decoded
    /// list stays within `max_list` bytes. Past it, the rest of the block
    /// is still read, so that the table keeps step, but no field is copied
    /// any more (a block that names a large table entry many times costs
    /// its own length, not the entry's times the count).
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list: usize,
        out: &mut FieldSection,
    ) -> Result<(), DecodeError> {
        let first_field = out.len();
        let mut size = 0usize;
        let mut dropping = false;
        let mut fields_seen = false;
        let mut scratch = Vec::new();
        let mut rest = block;
        while let Some(&first) = rest.first() {
            if first & 0xe0 == 0x20 {
                // Dynamic table size update: only before the first field.
                if fields_seen {
                    return Err(compression("a table size update after a field"));
                }
                let (max, used) = decode_int(rest, 5).map_err(int_error)?;
                if max > self.max_table as u64 {
                    return Err(compression("a table size past SETTINGS_HEADER_TABLE_SIZE"));
                }
                self.table.set_max(max as usize);
                rest = &rest[used..];
                continue;
            }
            fields_seen = true;
            let field = if first & 0x80 != 0 {
                let (index, used) = decode_int(rest, 7).map_err(int_error)?;
                let (name, value) = self.entry(index)?;
                rest = &rest[used..];
                size += entry_size(name.len(), value.len());
                dropping |= size > max_list;
                if !dropping {
                    let mark = out.mark();
                    out.buf_mut().extend_from_slice(name);
                    out.buf_mut().extend_from_slice(value);
                    out.close_field(mark, name.len());
                }
                continue;
            } else {
                // 01: incremental indexing (6-bit index); 0000 / 0001:
                // without indexing / never indexed (4-bit index).
                let index_it = first & 0x40 != 0;
                let (index, used) =
                    decode_int(rest, if index_it { 6 } else { 4 }).map_err(int_error)?;
                rest = &rest[used..];
                scratch.clear();
                let name_len = if index == 0 {
                    let used =
                        decode_string(rest, 7, &mut scratch, usize::MAX).map_err(string_error)?;
                    rest = &rest[used..];
                    scratch.len()
                } else {
                    scratch.extend_from_slice(self.entry(index)?.0);
                    scratch.len()
                };
                let used =
                    decode_string(rest, 7, &mut scratch, usize::MAX).map_err(string_error)?;
                rest = &rest[used..];
                (index_it, name_len)
            };
            let (index_it, name_len) = field;
            let (name, value) = scratch.split_at(name_len);
            if index_it {
                self.table.insert(name, value);
            }
            size += entry_size(name.len(), value.len());
            dropping |= size > max_list;
            if !dropping {
                let mark = out.mark();
                out.buf_mut().extend_from_slice(&scratch);
                out.close_field(mark, name_len);
            }
        }
        if dropping {
            out.truncate(first_field);
            return Err(DecodeError::TooLarge);
        }
        Ok(())
    }

    /// Static entries 1-61, then the dynamic table, newest first.
    fn entry(&self, index: u64) -> Result<(&[u8], &[u8]), DecodeError> {
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        match index {
            0 => Err(compression("index 0")),
            1..=61 => Ok(STATIC[index - 1]),
            _ => self
                .table
                .get(index - 62)
                .ok_or(compression("an index past the dynamic table")),
        }
    }
}

fn compression(what: &'static str) -> DecodeError {
    DecodeError::Compression(what)
}

fn int_error(err: fieldcoding::Error) -> DecodeError {
    match err {
        fieldcoding::Error::Incomplete => compression("a truncated representation"),
        _ => compression("an integer past 2^62"),
    }
}

fn string_error(err: fieldcoding::Error) -> DecodeError {
    match err {
        // Strings are decoded without a limit of their own: each is
        // bounded by the block, which the frame layer bounds.
        fieldcoding::Error::TooLong => compression("a string past its bound"),
        fieldcoding::Error::Huffman => compression("a bad Huffman string"),
        fieldcoding::Error::Incomplete => compression("a truncated string"),
        fieldcoding::Error::IntegerOverflow => compression("a string length past 2^62"),
    }
}

#[cfg(test)]
mod tests;
