//! sluice's HTTP/2 frame parser (`crates/http2`): any bytes, read as a
//! sequence of frames, parse or fail, never a panic; a parsed frame's
//! borrowed parts lie inside its payload.

use http2::frame::{self, Frame, Header, HEADER_LEN};

pub fn check(data: &[u8]) {
    let mut rest = data;
    while rest.len() >= HEADER_LEN {
        let (head, tail) = rest.split_at(HEADER_LEN);
        let Ok(head) = <&[u8; HEADER_LEN]>::try_from(head) else {
            return;
        };
        let header = Header::decode(head);
        let len = header.len as usize;
        if len > tail.len() {
            return;
        }
        let payload = &tail[..len];
        let inside = |part: &[u8]| {
            let start = part.as_ptr() as usize;
            let base = payload.as_ptr() as usize;
            assert!(part.is_empty() || (start >= base && start + part.len() <= base + len));
        };
        match frame::parse(&header, payload) {
            Ok(Frame::Data { data, .. }) => inside(data),
            Ok(Frame::Headers { block, .. } | Frame::Continuation { block, .. }) => inside(block),
            Ok(Frame::Settings { settings, .. }) => {
                inside(settings);
                assert_eq!(frame::settings(settings).count(), settings.len() / 6);
            }
            Ok(Frame::GoAway { debug, .. }) => inside(debug),
            Ok(_) | Err(_) => {}
        }
        rest = &tail[len..];
    }
}
