//! The connection core with itself (a client and a server in memory) and
//! with hand-written frames for the rules each must keep.

mod abuse;
mod pair;
mod upstream;

use std::time::Instant;

use bytes::BytesMut;

use super::*;

/// Moves `from`'s output into `to`; the events `to` then has.
fn pass(from: &mut Connection, to: &mut Connection) -> Result<Vec<Event>, Error> {
    let mut input = BytesMut::from(&from.output()[..]);
    from.output().clear();
    to.recv(&mut input, Instant::now())?;
    assert!(input.is_empty(), "whole frames were written");
    Ok(std::iter::from_fn(|| to.poll_event()).collect())
}

/// A server fed a client's preface and SETTINGS; its own output cleared.
fn server(config: Config) -> Connection {
    let mut server = Connection::new(Role::Server, config);
    let mut client = Connection::new(Role::Client, Config::default());
    pass(&mut client, &mut server).expect("the preface");
    server.output().clear();
    server
}

/// Frames written by hand.
fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_header(&mut out, kind, flags, stream, payload.len());
    out.extend_from_slice(payload);
    out
}

/// A GET's header block (static indexes, `:authority` literal).
fn get_block() -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_request(
        [
            (b":method", Some(&b"GET"[..])),
            (b":scheme", Some(b"https")),
            (b":authority", Some(b"example.com")),
            (b":path", Some(b"/")),
        ],
        [],
        false,
        &mut block,
    );
    block
}

/// Feeds `bytes` to `server`: the error, if any, and its output.
fn feed(server: &mut Connection, bytes: &[u8]) -> (Result<(), Error>, Vec<u8>) {
    let mut input = BytesMut::from(bytes);
    let result = server.recv(&mut input, Instant::now());
    let out = std::mem::take(server.output());
    (result, out)
}

/// The frames in `out`: (type, flags, stream, payload).
fn frames(out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut rest = out;
    let mut all = Vec::new();
    while rest.len() >= 9 {
        let header = frame::Header::decode(rest[..9].try_into().unwrap());
        let end = 9 + header.len as usize;
        all.push((
            header.kind,
            header.flags,
            header.stream,
            rest[9..end].to_vec(),
        ));
        rest = &rest[end..];
    }
    all
}

/// The error code of the first RST_STREAM for `stream` in `out`.
fn rst_code(out: &[u8], stream: u32) -> Option<u32> {
    frames(out)
        .into_iter()
        .find(|(kind, _, id, _)| *kind == frame::RST_STREAM && *id == stream)
        .map(|(_, _, _, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
}

/// The error code of a GOAWAY in `out`.
fn goaway_code(out: &[u8]) -> Option<u32> {
    frames(out)
        .into_iter()
        .find(|(kind, ..)| *kind == frame::GOAWAY)
        .map(|(_, _, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
}
