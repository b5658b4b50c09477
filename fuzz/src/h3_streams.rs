//! The client's control stream and QPACK encoder and decoder streams as
//! `crates/http3` reads them: arbitrary bytes in pieces, never a panic,
//! and the instruction buffers never grow past one instruction in waiting.

use bytes::BytesMut;
use http3::{
    control::ControlStream,
    qpack::{DecoderStream, EncoderStream},
};

pub fn check(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(first % 13) + 1;
    let mut control = ControlStream::default();
    let mut buf = BytesMut::new();
    let (mut encoder, mut decoder) = (EncoderStream, DecoderStream);
    let (mut enc_buf, mut dec_buf) = (Vec::new(), Vec::new());
    let (mut enc_failed, mut dec_failed, mut control_failed) = (false, false, false);
    let chunks: Vec<&[u8]> = stream.chunks(piece).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let fin = i + 1 == chunks.len();
        if !control_failed {
            buf.extend_from_slice(chunk);
            loop {
                match control.decode(&mut buf, fin) {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => {
                        control_failed = true;
                        break;
                    }
                }
            }
        }
        if !enc_failed {
            enc_buf.extend_from_slice(chunk);
            enc_failed = encoder.read(&mut enc_buf).is_err();
            assert!(
                enc_failed || enc_buf.len() <= 10,
                "{} bytes held",
                enc_buf.len()
            );
        }
        if !dec_failed {
            dec_buf.extend_from_slice(chunk);
            dec_failed = decoder.read(&mut dec_buf).is_err();
            assert!(
                dec_failed || dec_buf.len() <= 10,
                "{} bytes held",
                dec_buf.len()
            );
        }
    }
}
