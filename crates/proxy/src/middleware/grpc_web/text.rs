//! gRPC-Web's text mode: base64 (RFC 4648, with padding) both ways. The
//! answer is encoded one upstream read at a time, each a padded run of
//! its own (PROTOCOL-WEB.md: a client must not assume padding only at
//! message boundaries); the request is decoded as it streams, 4 characters
//! at a time, a padded group ending one run and another starting after it.

use base64::{engine::general_purpose::STANDARD, Engine as _};

/// Appends `bytes` as padded base64 to `out`.
pub(crate) fn encode(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    // The length above is exactly what padded base64 takes.
    let _ = STANDARD.encode_slice(bytes, &mut out[start..]);
}

/// A request body's base64, decoded as it arrives.
#[derive(Debug, Default)]
pub(crate) struct Base64Decoder {
    /// Characters of a group not yet whole (at most 3).
    carry: Vec<u8>,
}

/// The body is not base64.
#[derive(Debug)]
pub(crate) struct NotBase64;

impl Base64Decoder {
    /// Decodes the whole groups of what came so far into `out`.
    pub(crate) fn data(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), NotBase64> {
        let mut text = std::mem::take(&mut self.carry);
        text.extend_from_slice(chunk);
        let whole = text.len() - text.len() % 4;
        // Each run ends at a padded group (or at the end of what is whole).
        let mut start = 0;
        for (i, group) in text[..whole].chunks(4).enumerate() {
            let end = (i + 1) * 4;
            if group.contains(&b'=') || end == whole {
                STANDARD
                    .decode_vec(&text[start..end], out)
                    .map_err(|_| NotBase64)?;
                start = end;
            }
        }
        self.carry = text[whole..].to_vec();
        Ok(())
    }

    /// The body ended: nothing may be left over.
    pub(crate) fn end(&mut self) -> Result<(), NotBase64> {
        match self.carry.is_empty() {
            true => Ok(()),
            false => Err(NotBase64),
        }
    }
}
