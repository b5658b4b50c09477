//! The load generator's incremental response reader: any bytes, split at any
//! point, give responses or an error; never a panic, never a loop.

use bytes::BytesMut;
use load::ResponseReader;

pub fn check(data: &[u8]) {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let head_request = split & 1 == 1;
    let split = (split as usize).min(data.len());
    let mut reader = ResponseReader::default();
    let mut buf = BytesMut::new();
    for part in [&data[..split], &data[split..]] {
        buf.extend_from_slice(part);
        let before = buf.len();
        while let Ok(Some(_)) = reader.advance(&mut buf, head_request) {}
        assert!(buf.len() <= before);
    }
    let _ = reader.finish_at_eof();
}
