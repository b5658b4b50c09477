//! The client's QPACK encoder and decoder streams (RFC 9204 4.3, 4.4),
//! read with a dynamic table capacity of 0: the only instruction that can
//! be valid on the encoder stream is a capacity of 0; on the decoder
//! stream, only Stream Cancellation, since sluice never sends a section
//! that refers to a dynamic table. Anything else closes the connection,
//! which keeps a client from making the proxy hold header state.

use fieldcoding::decode_int;

use crate::{Code, Error};

/// Reads the client's encoder stream.
#[derive(Debug, Default)]
pub struct EncoderStream;

impl EncoderStream {
    /// Consumes the whole instructions at the start of `buf`; what is
    /// left is an instruction still arriving.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> Result<(), Error> {
        let error = |what| Error::Connection(Code::QPACK_ENCODER_STREAM_ERROR, what);
        while let Some(&first) = buf.first() {
            if first & 0xe0 != 0x20 {
                // 1xxxxxxx insert with a name reference, 01xxxxxx insert
                // with a literal name, 000xxxxx duplicate: each adds an
                // entry no table of capacity 0 can hold.
                return Err(error("an insert into a dynamic table of capacity 0"));
            }
            // 001xxxxx Set Dynamic Table Capacity.
            match decode_int(buf, 5) {
                Ok((0, used)) => drop(buf.drain(..used)),
                Ok(_) => return Err(error("a dynamic table capacity above the advertised 0")),
                Err(fieldcoding::Error::Incomplete) => return Ok(()),
                Err(_) => return Err(error("an integer past 2^62")),
            }
        }
        Ok(())
    }
}

/// Reads the client's decoder stream.
#[derive(Debug, Default)]
pub struct DecoderStream;

impl DecoderStream {
    /// Consumes the whole instructions at the start of `buf`.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> Result<(), Error> {
        let error = |what| Error::Connection(Code::QPACK_DECODER_STREAM_ERROR, what);
        while let Some(&first) = buf.first() {
            if first & 0x80 != 0 {
                return Err(error(
                    "a section acknowledgment for a section without dynamic references",
                ));
            }
            if first & 0x40 == 0 {
                return Err(error("an insert count increment with nothing inserted"));
            }
            // 01xxxxxx Stream Cancellation: nothing to release here.
            match decode_int(buf, 6) {
                Ok((_, used)) => drop(buf.drain(..used)),
                Err(fieldcoding::Error::Incomplete) => return Ok(()),
                Err(_) => return Err(error("an integer past 2^62")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<(), Error>) -> Option<Code> {
        match result {
            Err(Error::Connection(code, _)) => Some(code),
            _ => None,
        }
    }

    #[test]
    fn the_encoder_stream_takes_capacity_0_only() {
        let mut stream = EncoderStream;
        let mut buf = vec![0x20, 0x20];
        assert_eq!(stream.read(&mut buf), Ok(()));
        assert!(buf.is_empty());
        let encoder_error = Some(Code::QPACK_ENCODER_STREAM_ERROR);
        // Set Dynamic Table Capacity 4096: 001 11111 then 4065.
        assert_eq!(
            code(stream.read(&mut vec![0x3f, 0xe1, 0x1f])),
            encoder_error
        );
        // Insert With Literal Name "a" = "b"; with a name reference; duplicate.
        for insert in [
            &[0x41, b'a', 0x01, b'b'][..],
            &[0xc0 | 17, 0x01, b'x'],
            &[0x00],
        ] {
            assert_eq!(
                code(stream.read(&mut insert.to_vec())),
                encoder_error,
                "{insert:?}"
            );
        }
        // A capacity split across reads waits for its end.
        let mut partial = vec![0x3f];
        assert_eq!(stream.read(&mut partial), Ok(()));
        assert_eq!(partial, [0x3f]);
    }

    #[test]
    fn the_decoder_stream_takes_stream_cancellations_only() {
        let mut stream = DecoderStream;
        let mut buf = vec![0x44, 0x7f, 0x10];
        assert_eq!(stream.read(&mut buf), Ok(()));
        assert!(buf.is_empty());
        let decoder_error = Some(Code::QPACK_DECODER_STREAM_ERROR);
        assert_eq!(
            code(stream.read(&mut vec![0x84])),
            decoder_error,
            "section ack"
        );
        assert_eq!(
            code(stream.read(&mut vec![0x01])),
            decoder_error,
            "increment"
        );
        assert_eq!(
            code(stream.read(&mut vec![0x00])),
            decoder_error,
            "increment 0"
        );
    }
}
