//! The rules and limits, each with the frames a hostile peer sends.

use super::*;

fn calm(out: &[u8]) -> bool {
    goaway_code(out) == Some(Reason::ENHANCE_YOUR_CALM.0)
}

#[test]
fn the_preface_and_a_first_settings_are_required() {
    let mut server = Connection::new(Role::Server, Config::default());
    let (result, out) = feed(&mut server, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(result.is_err());
    assert_eq!(goaway_code(&out), Some(Reason::PROTOCOL_ERROR.0));
    let mut server = Connection::new(Role::Server, Config::default());
    let bytes = [&PREFACE[..], &raw(frame::PING, 0, 0, &[0; 8])].concat();
    assert!(feed(&mut server, &bytes).0.is_err(), "PING before SETTINGS");
}

#[test]
fn malformed_requests_are_stream_errors_and_the_connection_serves_on() {
    let mut server = server(Config::default());
    let mut upper = get_block();
    hpack::encode_field(b"X-Upper", b"1", false, &mut upper);
    let (result, out) = feed(
        &mut server,
        &raw(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &upper,
        ),
    );
    assert!(result.is_ok());
    assert_eq!(rst_code(&out, 1), Some(Reason::PROTOCOL_ERROR.0));
    assert!(
        server.poll_event().is_none(),
        "never seen by the application"
    );
    let (result, _) = feed(
        &mut server,
        &raw(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            3,
            &get_block(),
        ),
    );
    assert!(result.is_ok());
    assert!(matches!(
        server.poll_event(),
        Some(Event::Request { stream: 3, .. })
    ));
}

#[test]
fn stream_id_rules() {
    let mut server = server(Config::default());
    let get = |id| {
        raw(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            id,
            &get_block(),
        )
    };
    assert_eq!(
        goaway_code(&feed(&mut server, &get(2)).1),
        Some(Reason::PROTOCOL_ERROR.0),
        "even"
    );
    let mut server = self::server(Config::default());
    let _ = feed(&mut server, &get(5));
    assert_eq!(
        goaway_code(&feed(&mut server, &get(3)).1),
        Some(Reason::PROTOCOL_ERROR.0),
        "lower"
    );
    let mut server = self::server(Config::default());
    let (_, out) = feed(&mut server, &raw(frame::DATA, 0, 9, b"x"));
    assert_eq!(
        goaway_code(&out),
        Some(Reason::PROTOCOL_ERROR.0),
        "DATA on an idle stream"
    );
    let mut server = self::server(Config::default());
    let (_, out) = feed(
        &mut server,
        &raw(frame::WINDOW_UPDATE, 0, 7, &1u32.to_be_bytes()),
    );
    assert_eq!(
        goaway_code(&out),
        Some(Reason::PROTOCOL_ERROR.0),
        "WINDOW_UPDATE on an idle stream"
    );
}

#[test]
fn concurrency_is_refused_past_the_limit() {
    let mut server = server(Config {
        max_concurrent_streams: 2,
        ..Config::default()
    });
    let open = |id| raw(frame::HEADERS, frame::END_HEADERS, id, &get_block());
    let (_, out) = feed(&mut server, &[open(1), open(3), open(5)].concat());
    assert_eq!(rst_code(&out, 5), Some(Reason::REFUSED_STREAM.0));
    assert_eq!(server.open_streams(), 2);
}

#[test]
fn made_you_reset_streams_hold_their_slot_and_are_bounded() {
    // A WINDOW_UPDATE of 0 makes the server reset the stream; the reset
    // stream keeps its slot until the application says its work ended.
    let config = Config {
        max_concurrent_streams: 2,
        max_local_resets: 3,
        ..Config::default()
    };
    let mut server = server(config);
    let open = |id| raw(frame::HEADERS, frame::END_HEADERS, id, &get_block());
    let zero = |id| raw(frame::WINDOW_UPDATE, 0, id, &0u32.to_be_bytes());
    let (_, out) = feed(
        &mut server,
        &[open(1), zero(1), open(3), zero(3), open(5)].concat(),
    );
    assert_eq!(rst_code(&out, 1), Some(Reason::PROTOCOL_ERROR.0));
    assert_eq!(
        rst_code(&out, 5),
        Some(Reason::REFUSED_STREAM.0),
        "slots still held"
    );
    server.done(1);
    server.done(3);
    let (_, out) = feed(&mut server, &[open(7), zero(7)].concat());
    assert!(calm(&out), "the fourth fault within the window");
}

#[test]
fn flow_control_violations() {
    let mut server = server(Config {
        stream_window: 4,
        connection_window: 65_535,
        ..Config::default()
    });
    let open = raw(frame::HEADERS, frame::END_HEADERS, 1, &get_block());
    let (_, out) = feed(
        &mut server,
        &[open, raw(frame::DATA, 0, 1, b"12345")].concat(),
    );
    assert_eq!(rst_code(&out, 1), Some(Reason::FLOW_CONTROL_ERROR.0));
    let mut server = self::server(Config::default());
    let open = raw(frame::HEADERS, frame::END_HEADERS, 1, &get_block());
    let up = |id, n: u32| raw(frame::WINDOW_UPDATE, 0, id, &n.to_be_bytes());
    let (_, out) = feed(&mut server, &[open, up(1, frame::MAX_WINDOW)].concat());
    assert_eq!(
        rst_code(&out, 1),
        Some(Reason::FLOW_CONTROL_ERROR.0),
        "stream window overflow"
    );
    let (_, out) = feed(&mut server, &up(0, frame::MAX_WINDOW));
    assert_eq!(
        goaway_code(&out),
        Some(Reason::FLOW_CONTROL_ERROR.0),
        "connection window overflow"
    );
}

#[test]
fn continuation_rules_and_flood() {
    let mut server = server(Config::default());
    let block = get_block();
    let (first, rest) = block.split_at(3);
    let bytes = [
        raw(frame::HEADERS, 0, 1, first),
        raw(frame::PING, 0, 0, &[0; 8]),
        raw(frame::CONTINUATION, frame::END_HEADERS, 1, rest),
    ]
    .concat();
    assert_eq!(
        goaway_code(&feed(&mut server, &bytes).1),
        Some(Reason::PROTOCOL_ERROR.0),
        "a frame inside a block"
    );
    let mut server = self::server(Config {
        max_header_list: 1024,
        ..Config::default()
    });
    let mut flood = raw(frame::HEADERS, 0, 1, first);
    for _ in 0..40 {
        flood.extend(raw(frame::CONTINUATION, 0, 1, &[0x40; 500]));
    }
    assert!(calm(&feed(&mut server, &flood).1), "a block past its bound");
    let mut server = self::server(Config {
        max_control_frames: 100,
        ..Config::default()
    });
    let mut empty = raw(frame::HEADERS, 0, 1, first);
    for _ in 0..200 {
        empty.extend(raw(frame::CONTINUATION, 0, 1, &[]));
    }
    assert!(
        calm(&feed(&mut server, &empty).1),
        "empty CONTINUATION frames"
    );
}

#[test]
fn control_frame_floods_are_bounded() {
    for flood in [
        raw(frame::PING, 0, 0, &[0; 8]),
        raw(frame::SETTINGS, 0, 0, &[]),
        raw(frame::PRIORITY, 0, 1, &[0, 0, 0, 0, 16]),
    ] {
        let mut server = server(Config {
            max_control_frames: 50,
            ..Config::default()
        });
        let bytes: Vec<u8> = std::iter::repeat_n(flood.clone(), 60).flatten().collect();
        assert!(calm(&feed(&mut server, &bytes).1), "{:?}", flood[3]);
    }
    let mut server = server(Config {
        max_control_frames: 50,
        ..Config::default()
    });
    let mut empty = raw(frame::HEADERS, frame::END_HEADERS, 1, &get_block());
    for _ in 0..60 {
        empty.extend(raw(frame::DATA, 0, 1, b""));
    }
    assert!(calm(&feed(&mut server, &empty).1), "empty DATA");
}

#[test]
fn hpack_bomb_and_oversize_heads_get_431_not_memory() {
    let mut server = server(Config {
        max_header_list: 4096,
        ..Config::default()
    });
    let mut bomb = get_block();
    // A 4,000-byte value indexed, then named 3,000 times.
    bomb.extend_from_slice(&[0x40, 0x01, b'x', 0x7f, 0xa1, 0x1e]);
    bomb.extend(std::iter::repeat_n(b'y', 4000));
    bomb.extend(std::iter::repeat_n(0xbe, 3000));
    let mut bytes = Vec::new();
    frame::write_headers(&mut bytes, 1, &bomb, true, 16_384);
    let (result, _) = feed(&mut server, &bytes);
    assert!(result.is_ok());
    assert_eq!(server.poll_event(), Some(Event::HeadTooLarge { stream: 1 }));
}

#[test]
fn data_and_trailer_rules() {
    let mut server = server(Config::default());
    let post = {
        let mut block = get_block();
        hpack::encode_field(b"content-length", b"3", false, &mut block);
        block
    };
    let open = raw(frame::HEADERS, frame::END_HEADERS, 1, &post);
    let (_, out) = feed(
        &mut server,
        &[open.clone(), raw(frame::DATA, frame::END_STREAM, 1, b"ab")].concat(),
    );
    assert_eq!(
        rst_code(&out, 1),
        Some(Reason::PROTOCOL_ERROR.0),
        "shorter than content-length"
    );
    let mut server = self::server(Config::default());
    let trailers_open = raw(frame::HEADERS, frame::END_HEADERS, 1, &[0x82]);
    let no_end = [
        raw(frame::HEADERS, frame::END_HEADERS, 1, &get_block()),
        trailers_open,
    ]
    .concat();
    let (_, out) = feed(&mut server, &no_end);
    assert_eq!(
        rst_code(&out, 1),
        Some(Reason::PROTOCOL_ERROR.0),
        "trailers without END_STREAM, or with a pseudo-header"
    );
    let mut server = self::server(Config::default());
    let done = raw(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &get_block(),
    );
    let (_, out) = feed(&mut server, &[done, raw(frame::DATA, 0, 1, b"x")].concat());
    assert_eq!(
        rst_code(&out, 1),
        Some(Reason::STREAM_CLOSED.0),
        "DATA after END_STREAM"
    );
    assert!(matches!(server.poll_event(), Some(Event::Request { .. })));
}

#[test]
fn push_promise_and_settings_values() {
    let mut server = server(Config::default());
    let (_, out) = feed(
        &mut server,
        &raw(frame::PUSH_PROMISE, frame::END_HEADERS, 1, &[0, 0, 0, 2]),
    );
    assert_eq!(goaway_code(&out), Some(Reason::PROTOCOL_ERROR.0));
    let mut client = Connection::new(Role::Client, Config::default());
    client.output().clear();
    let push_on = raw(frame::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 1]);
    let (_, out) = feed(&mut client, &push_on);
    assert_eq!(
        goaway_code(&out),
        Some(Reason::PROTOCOL_ERROR.0),
        "a server enabling push"
    );
}
