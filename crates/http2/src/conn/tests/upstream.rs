//! A hostile upstream against the client core (issue 45, stage 1): each
//! rule an upstream can break, with the frames it sends. What the proxy
//! must be able to rely on: a stream the upstream never processed is told
//! apart (REFUSED_STREAM: safe to retry), every other fault ends only its
//! own stream or the connection, and nothing the upstream sends grows
//! without bound.

use super::*;

/// A client that has read the server's SETTINGS (`settings`), with one
/// request open per entry of `open` (true: the request has no body).
fn client_with(settings: &[(u16, u32)], open: &[bool]) -> (Connection, Vec<u32>) {
    let mut client = Connection::new(Role::Client, Config::default());
    let mut bytes = Vec::new();
    frame::write_settings(&mut bytes, settings);
    let (result, _) = feed(&mut client, &bytes);
    result.expect("the server's SETTINGS");
    let ids = open
        .iter()
        .map(|&end_stream| {
            client
                .send_request(
                    [
                        (b":method", Some(&b"POST"[..])),
                        (b":scheme", Some(b"http")),
                        (b":authority", Some(b"upstream")),
                        (b":path", Some(b"/")),
                    ],
                    [],
                    end_stream,
                )
                .expect("a stream")
        })
        .collect();
    client.output().clear();
    (client, ids)
}

fn response(stream: u32, status: u16, fields: &[(&[u8], &[u8])], flags: u8) -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_response(status, fields.iter().copied(), false, &mut block);
    raw(frame::HEADERS, frame::END_HEADERS | flags, stream, &block)
}

/// The upstream answers `stream` 200 and the client hears it: the
/// connection (and its HPACK state) came through what went before.
fn answered_200(client: &mut Connection, stream: u32) {
    let (result, _) = feed(client, &response(stream, 200, &[], frame::END_STREAM));
    assert!(result.is_ok(), "{result:?}");
    assert!(matches!(
        client.poll_event(),
        Some(Event::Response { status: 200, .. })
    ));
}

fn events(client: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| client.poll_event()).collect()
}

#[test]
fn goaway_below_streams_in_flight_refuses_them_for_a_retry() {
    let (mut client, ids) = client_with(&[], &[true, true, true]);
    let mut goaway = Vec::new();
    frame::write_goaway(&mut goaway, ids[0], Reason::NO_ERROR, b"");
    let (result, _) = feed(&mut client, &goaway);
    assert!(result.is_ok());
    let got = events(&mut client);
    for &stream in &ids[1..] {
        assert!(
            got.contains(&Event::Reset {
                stream,
                reason: Reason::REFUSED_STREAM
            }),
            "stream {stream} was not processed: {got:?}"
        );
    }
    assert!(!got
        .iter()
        .any(|e| matches!(e, Event::Reset { stream, .. } if *stream == ids[0])));
    assert_eq!(client.open_streams(), 1, "only the processed one is left");
    assert!(client.going_away());
    // A later GOAWAY may not raise the bound (RFC 9113 6.8): the first holds.
    let mut again = Vec::new();
    frame::write_goaway(&mut again, 99, Reason::NO_ERROR, b"");
    assert!(feed(&mut client, &again).0.is_ok());
    assert_eq!(
        events(&mut client),
        [Event::GoAway {
            last_stream: ids[0],
            reason: Reason::NO_ERROR
        }]
    );
    // The processed stream still gets its answer.
    answered_200(&mut client, ids[0]);
}

#[test]
fn refused_stream_and_other_resets_reach_the_application_as_they_came() {
    let (mut client, ids) = client_with(&[], &[true, true]);
    let mut bytes = Vec::new();
    frame::write_rst_stream(&mut bytes, ids[0], Reason::REFUSED_STREAM);
    frame::write_rst_stream(&mut bytes, ids[1], Reason::INTERNAL_ERROR);
    assert!(feed(&mut client, &bytes).0.is_ok());
    assert_eq!(
        events(&mut client),
        [
            Event::Reset {
                stream: ids[0],
                reason: Reason::REFUSED_STREAM
            },
            Event::Reset {
                stream: ids[1],
                reason: Reason::INTERNAL_ERROR
            },
        ]
    );
    assert_eq!(client.open_streams(), 0);
}

#[test]
fn max_concurrent_streams_zero_and_one_hold_new_requests_back() {
    let (mut client, ids) = client_with(&[(frame::setting::MAX_CONCURRENT_STREAMS, 0)], &[]);
    assert!(ids.is_empty());
    let head = [
        (&b":method"[..], Some(&b"GET"[..])),
        (b":scheme", Some(b"http")),
        (b":authority", Some(b"a")),
        (b":path", Some(b"/")),
    ];
    assert_eq!(client.send_request(head, [], true), Err(OpenError::Full));
    assert!(client.output().is_empty(), "nothing was sent");
    let (mut client, ids) = client_with(&[(frame::setting::MAX_CONCURRENT_STREAMS, 1)], &[true]);
    assert_eq!(ids, [1]);
    assert_eq!(client.send_request(head, [], true), Err(OpenError::Full));
    let (result, _) = feed(&mut client, &response(1, 204, &[], frame::END_STREAM));
    assert!(result.is_ok());
    assert_eq!(
        client.send_request(head, [], true),
        Ok(3),
        "a slot came free"
    );
}

#[test]
fn settings_shrinking_the_window_mid_body_stop_the_body_until_updates_pay_it_back() {
    let (mut client, ids) = client_with(&[], &[false]);
    let stream = ids[0];
    let mut body = Bytes::from(vec![b'x'; 40_000]);
    assert_eq!(client.send_data(stream, &mut body, false), 40_000);
    // The server lowers the window to 1,000: 39,000 were sent too many.
    let mut shrink = Vec::new();
    frame::write_settings(&mut shrink, &[(frame::setting::INITIAL_WINDOW_SIZE, 1_000)]);
    assert!(feed(&mut client, &shrink).0.is_ok());
    let mut more = Bytes::from(vec![b'y'; 10]);
    assert_eq!(client.send_data(stream, &mut more, true), 0);
    assert_eq!(client.send_window(stream), 0);
    let mut update = Vec::new();
    frame::write_window_update(&mut update, stream, 39_000);
    assert!(feed(&mut client, &update).0.is_ok());
    assert_eq!(
        client.send_window(stream),
        0,
        "still at 0: -39,000 + 39,000"
    );
    assert!(!events(&mut client).contains(&Event::Writable { stream }));
    let mut update = Vec::new();
    frame::write_window_update(&mut update, stream, 5);
    assert!(feed(&mut client, &update).0.is_ok());
    assert!(events(&mut client).contains(&Event::Writable { stream }));
    assert_eq!(client.send_data(stream, &mut more, true), 5);
}

#[test]
fn push_promise_ends_the_connection() {
    let (mut client, ids) = client_with(&[], &[true]);
    let mut payload = 2u32.to_be_bytes().to_vec();
    payload.extend_from_slice(&get_block());
    let (result, out) = feed(
        &mut client,
        &raw(frame::PUSH_PROMISE, frame::END_HEADERS, ids[0], &payload),
    );
    assert!(result.is_err());
    assert_eq!(goaway_code(&out), Some(Reason::PROTOCOL_ERROR.0));
}

#[test]
fn a_flood_of_interim_heads_ends_the_stream_not_the_memory() {
    let (mut client, ids) = client_with(&[], &[true, true]);
    let mut flood = Vec::new();
    for _ in 0..1_000 {
        flood.extend_from_slice(&response(ids[0], 103, &[(b"link", b"</a>")], 0));
    }
    let (result, out) = feed(&mut client, &flood);
    assert!(
        result.is_ok(),
        "a stream error, not the connection's: {result:?}"
    );
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::PROTOCOL_ERROR.0));
    let got = events(&mut client);
    let interim = got
        .iter()
        .filter(|e| matches!(e, Event::Response { status: 103, .. }))
        .count();
    assert!(
        interim <= MAX_INTERIM_HEADS,
        "{interim} interim heads passed on"
    );
    assert!(got.contains(&Event::Reset {
        stream: ids[0],
        reason: Reason::PROTOCOL_ERROR
    }));
    // The other stream is answered as usual.
    answered_200(&mut client, ids[1]);
}

#[test]
fn response_heads_that_break_the_rules_end_their_stream() {
    let no_status = {
        let mut block = Vec::new();
        hpack::encode_field(b"content-type", b"text/plain", false, &mut block);
        block
    };
    let mut status_twice = Vec::new();
    hpack::encode_response(200, [], false, &mut status_twice);
    hpack::encode_response(204, [], false, &mut status_twice);
    let mut pseudo_in_request_style = Vec::new();
    hpack::encode_response(200, [], false, &mut pseudo_in_request_style);
    hpack::encode_field(b":path", b"/", false, &mut pseudo_in_request_style);
    let mut connection_field = Vec::new();
    hpack::encode_response(
        200,
        [(&b"connection"[..], &b"close"[..])],
        false,
        &mut connection_field,
    );
    for (what, block) in [
        ("no :status", no_status),
        ("two :status", status_twice),
        ("a request pseudo-header", pseudo_in_request_style),
        ("a connection-specific field", connection_field),
    ] {
        let (mut client, ids) = client_with(&[], &[true]);
        let (result, out) = feed(
            &mut client,
            &raw(frame::HEADERS, frame::END_HEADERS, ids[0], &block),
        );
        assert!(result.is_ok(), "{what}: the connection goes on");
        assert_eq!(
            rst_code(&out, ids[0]),
            Some(Reason::PROTOCOL_ERROR.0),
            "{what}"
        );
        assert_eq!(
            events(&mut client),
            [Event::Reset {
                stream: ids[0],
                reason: Reason::PROTOCOL_ERROR
            }],
            "{what}: no response reaches the application"
        );
    }
}

#[test]
fn content_length_mismatches_end_the_stream() {
    // More DATA than declared.
    let (mut client, ids) = client_with(&[], &[true]);
    let mut bytes = response(ids[0], 200, &[(b"content-length", b"3")], 0);
    bytes.extend(raw(frame::DATA, frame::END_STREAM, ids[0], b"four"));
    let (result, out) = feed(&mut client, &bytes);
    assert!(result.is_ok());
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::PROTOCOL_ERROR.0));
    assert!(!events(&mut client).iter().any(|e| matches!(
        e,
        Event::Data {
            end_stream: true,
            ..
        }
    )));
    // Fewer, then the end.
    let (mut client, ids) = client_with(&[], &[true]);
    let mut bytes = response(ids[0], 200, &[(b"content-length", b"10")], 0);
    bytes.extend(raw(frame::DATA, frame::END_STREAM, ids[0], b"short"));
    let (result, out) = feed(&mut client, &bytes);
    assert!(result.is_ok());
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::PROTOCOL_ERROR.0));
    assert!(!events(&mut client).iter().any(|e| matches!(
        e,
        Event::Data {
            end_stream: true,
            ..
        }
    )));
}

#[test]
fn an_oversize_response_head_ends_its_stream_and_costs_only_its_length() {
    let (mut client, ids) = client_with(&[], &[true, true]);
    let big = vec![b'v'; 12_000];
    let mut block = Vec::new();
    hpack::encode_response(
        200,
        [(&b"x-a"[..], &big[..]), (b"x-b", &big[..])],
        false,
        &mut block,
    );
    // Past the client's 16 KiB header list: in CONTINUATIONs, as a server would.
    let (first, rest) = block.split_at(16_000);
    let mut bytes = raw(frame::HEADERS, 0, ids[0], first);
    bytes.extend(raw(frame::CONTINUATION, frame::END_HEADERS, ids[0], rest));
    let (result, out) = feed(&mut client, &bytes);
    assert!(result.is_ok());
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::PROTOCOL_ERROR.0));
    assert!(!events(&mut client)
        .iter()
        .any(|e| matches!(e, Event::Response { .. })));
    answered_200(&mut client, ids[1]);
}

#[test]
fn data_beyond_the_window_is_a_flow_control_error() {
    let (mut client, ids) = client_with(&[], &[true]);
    let mut bytes = response(ids[0], 200, &[], 0);
    // The client's stream window is 256 KiB: one byte more, in frames of 16 KiB.
    let window = Config::default().stream_window as usize;
    let chunk = vec![b'z'; 16_384];
    for _ in 0..window / chunk.len() {
        bytes.extend(raw(frame::DATA, 0, ids[0], &chunk));
    }
    bytes.extend(raw(frame::DATA, 0, ids[0], b"!"));
    let (result, out) = feed(&mut client, &bytes);
    assert!(
        result.is_ok(),
        "the stream's fault, within the connection's window"
    );
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::FLOW_CONTROL_ERROR.0));
}

#[test]
fn data_before_the_response_head_ends_the_stream() {
    let (mut client, ids) = client_with(&[], &[true]);
    let (result, out) = feed(&mut client, &raw(frame::DATA, 0, ids[0], b"early"));
    assert!(result.is_ok());
    assert_eq!(rst_code(&out, ids[0]), Some(Reason::PROTOCOL_ERROR.0));
    assert!(!events(&mut client)
        .iter()
        .any(|e| matches!(e, Event::Data { .. })));
}
