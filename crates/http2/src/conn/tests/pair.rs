//! Our client against our server, in memory.

use super::*;

fn open_get(client: &mut Connection, end_stream: bool) -> u32 {
    client
        .send_request(
            [
                (b":method", Some(&b"GET"[..])),
                (b":scheme", Some(b"https")),
                (b":authority", Some(b"example.com")),
                (b":path", Some(b"/items?q=1")),
            ],
            [(&b"accept"[..], &b"*/*"[..])],
            end_stream,
        )
        .expect("a stream")
}

#[test]
fn a_request_and_its_answer_with_body_and_trailers() {
    let mut client = Connection::new(Role::Client, Config::default());
    let mut server = Connection::new(Role::Server, Config::default());
    let stream = open_get(&mut client, true);
    let events = pass(&mut client, &mut server).unwrap();
    let Some(Event::Request {
        stream: got,
        head,
        end_stream: true,
    }) = events.into_iter().next()
    else {
        panic!("no request");
    };
    assert_eq!(got, stream);
    assert_eq!(head.path(), Some(&b"/items?q=1"[..]));
    assert_eq!(
        head.iter().collect::<Vec<_>>(),
        [(&b"accept"[..], &b"*/*"[..])]
    );
    // The client's SETTINGS reached the server: acknowledged; and back.
    assert!(pass(&mut server, &mut client).unwrap().is_empty());
    server.send_response(stream, 103, [(&b"link"[..], &b"</s.css>"[..])], false);
    server.send_response(
        stream,
        200,
        [(&b"content-type"[..], &b"text/plain"[..])],
        false,
    );
    let mut body = bytes::Bytes::from_static(b"hello");
    assert_eq!(server.send_data(stream, &mut body, false), 5);
    server.send_trailers(stream, [(&b"grpc-status"[..], &b"0"[..])]);
    let events = pass(&mut server, &mut client).unwrap();
    assert!(matches!(
        &events[0],
        Event::Response {
            status: 103,
            end_stream: false,
            ..
        }
    ));
    assert!(matches!(
        &events[1],
        Event::Response {
            status: 200,
            end_stream: false,
            ..
        }
    ));
    assert_eq!(
        events[2],
        Event::Data {
            stream,
            data: bytes::Bytes::from_static(b"hello"),
            end_stream: false
        }
    );
    assert!(
        matches!(&events[3], Event::Trailers { fields, .. } if fields.get(b"grpc-status") == Some(&b"0"[..]))
    );
    assert_eq!(client.open_streams(), 0, "both sides closed");
    assert_eq!(server.open_streams(), 0);
}

#[test]
fn flow_control_holds_data_until_the_window_opens() {
    let small = Config {
        stream_window: 10,
        connection_window: 65_535,
        ..Config::default()
    };
    let mut client = Connection::new(Role::Client, Config::default());
    let mut server = Connection::new(Role::Server, small);
    pass(&mut server, &mut client).unwrap();
    let stream = client
        .send_request(
            [
                (b":method", Some(&b"POST"[..])),
                (b":scheme", Some(b"http")),
                (b":authority", Some(b"a")),
                (b":path", Some(b"/")),
            ],
            [],
            false,
        )
        .unwrap();
    let mut body = bytes::Bytes::from(vec![b'x'; 25]);
    assert_eq!(
        client.send_data(stream, &mut body, true),
        10,
        "the server's window is 10"
    );
    assert_eq!(body.len(), 15);
    let events = pass(&mut client, &mut server).unwrap();
    assert!(matches!(&events[1], Event::Data { data, end_stream: false, .. } if data.len() == 10));
    // Consumed: half the window (5) or more is granted back at once.
    server.release(stream, 10);
    let events = pass(&mut server, &mut client).unwrap();
    assert!(events.contains(&Event::Writable { stream }), "{events:?}");
    assert_eq!(client.send_data(stream, &mut body, true), 10);
}

#[test]
fn heads_larger_than_a_frame_go_in_continuations_and_stream_ids_go_up() {
    let mut client = Connection::new(Role::Client, Config::default());
    let mut server = Connection::new(Role::Server, Config::default());
    let big = vec![b'v'; 20_000];
    let first = client
        .send_request(
            [
                (b":method", Some(&b"GET"[..])),
                (b":scheme", Some(b"http")),
                (b":authority", Some(b"a")),
                (b":path", Some(b"/")),
            ],
            [(&b"x-big"[..], &big[..])],
            true,
        )
        .unwrap();
    let second = open_get(&mut client, true);
    assert_eq!((first, second), (1, 3));
    let kinds: Vec<u8> = frames(&client.output()[24..]).iter().map(|f| f.0).collect();
    assert!(kinds.contains(&frame::CONTINUATION), "{kinds:?}");
    // 20 KB is past the server's 16 KiB header list: 431 for the first.
    let events = pass(&mut client, &mut server).unwrap();
    assert_eq!(events[0], Event::HeadTooLarge { stream: 1 });
    assert!(matches!(&events[1], Event::Request { stream: 3, .. }));
}
