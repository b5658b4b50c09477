//! sluice's HTTP/2 connection core (`crates/http2`), server or client
//! (the first byte says which, and how the rest is cut into reads), fed
//! arbitrary bytes after a valid start: never a panic, never more open
//! streams than it advertised, and everything it writes is well-formed
//! frames that its own parser takes.

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http2::{
    conn::PREFACE,
    frame::{self, Header, HEADER_LEN},
    Config, Connection, Event, Role,
};

fn check_output(out: &[u8]) {
    let mut rest = out;
    if rest.starts_with(PREFACE) {
        rest = &rest[PREFACE.len()..];
    }
    while !rest.is_empty() {
        let head: &[u8; HEADER_LEN] = rest[..HEADER_LEN].try_into().expect("a whole header");
        let header = Header::decode(head);
        let end = HEADER_LEN + header.len as usize;
        assert!(rest.len() >= end, "a whole frame");
        frame::parse(&header, &rest[HEADER_LEN..end]).expect("its own frames parse");
        rest = &rest[end..];
    }
}

pub fn check(data: &[u8]) {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    let role = if selector & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let piece = usize::from(selector >> 1) + 1;
    let config = Config {
        max_concurrent_streams: 4,
        max_header_list: 2048,
        ..Config::default()
    };
    let mut conn = Connection::new(role, config);
    let mut start = Vec::new();
    if role == Role::Server {
        start.extend_from_slice(PREFACE);
    }
    frame::write_settings(&mut start, &[]);
    let mut input = BytesMut::from(&start[..]);
    conn.recv(&mut input, Instant::now())
        .expect("a valid start");
    if role == Role::Client {
        let _ = conn.send_request(
            [
                (b":method", Some(&b"GET"[..])),
                (b":scheme", Some(b"http")),
                (b":authority", Some(b"a")),
                (b":path", Some(b"/")),
            ],
            [],
            true,
        );
    }
    for chunk in data.chunks(piece) {
        input.extend_from_slice(chunk);
        let failed = conn.recv(&mut input, Instant::now()).is_err();
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Request { stream, .. } | Event::HeadTooLarge { stream } => {
                    conn.send_response(stream, 200, [], false);
                    let mut body = Bytes::from_static(b"ok");
                    conn.send_data(stream, &mut body, true);
                }
                Event::Data { stream, data, .. } => conn.release(stream, data.len() as u32),
                Event::Reset { stream, .. } => conn.done(stream),
                _ => {}
            }
        }
        assert!(
            conn.open_streams() <= 4 + 1,
            "{} streams open",
            conn.open_streams()
        );
        check_output(conn.output());
        conn.output().clear();
        if failed {
            return;
        }
    }
}
