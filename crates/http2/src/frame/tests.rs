use super::*;

fn one(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame<'_>, Error> {
    let header = Header {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    };
    let mut bytes = Vec::new();
    header.encode(&mut bytes);
    let decoded = Header::decode(bytes[..9].try_into().unwrap());
    assert_eq!(decoded, header);
    parse(&decoded, payload)
}

#[test]
fn written_frames_parse_back() {
    let mut out = Vec::new();
    write_settings(
        &mut out,
        &[
            (setting::MAX_CONCURRENT_STREAMS, 100),
            (setting::INITIAL_WINDOW_SIZE, 65_535),
        ],
    );
    write_ping(&mut out, true, *b"12345678");
    write_window_update(&mut out, 3, 1000);
    write_rst_stream(&mut out, 5, Reason::CANCEL);
    write_goaway(&mut out, 7, Reason::ENHANCE_YOUR_CALM, b"calm");
    write_headers(&mut out, 1, &[0x82; 40], true, 16);
    let mut frames = Vec::new();
    let mut rest = &out[..];
    while !rest.is_empty() {
        let header = Header::decode(rest[..9].try_into().unwrap());
        let end = 9 + header.len as usize;
        frames.push(format!("{:?}", parse(&header, &rest[9..end]).unwrap()));
        rest = &rest[end..];
    }
    assert!(frames[0].starts_with("Settings { ack: false"));
    assert_eq!(
        frames[1],
        "Ping { ack: true, data: [49, 50, 51, 52, 53, 54, 55, 56] }"
    );
    assert_eq!(frames[2], "WindowUpdate { stream: 3, increment: 1000 }");
    assert_eq!(frames[3], "RstStream { stream: 5, reason: Reason(8) }");
    assert!(frames[4].starts_with("GoAway { last_stream: 7, reason: Reason(11)"));
    assert!(
        frames[5].starts_with("Headers { stream: 1") && frames[5].contains("end_headers: false")
    );
    assert_eq!(frames.len(), 8, "HEADERS and two CONTINUATIONs");
    assert!(frames[7].contains("end_headers: true"));
}

#[test]
fn stream_zero_rules() {
    for kind in [
        DATA,
        HEADERS,
        PRIORITY,
        RST_STREAM,
        PUSH_PROMISE,
        CONTINUATION,
    ] {
        let payload = [0u8; 5];
        assert!(
            matches!(
                one(
                    kind,
                    0,
                    0,
                    &payload[..if kind == RST_STREAM { 4 } else { 5 }]
                ),
                Err(Error::Connection(Reason::PROTOCOL_ERROR, _))
            ),
            "{kind}"
        );
    }
    for (kind, len) in [(SETTINGS, 0), (PING, 8), (GOAWAY, 8)] {
        assert!(
            matches!(
                one(kind, 0, 1, &vec![0; len]),
                Err(Error::Connection(Reason::PROTOCOL_ERROR, _))
            ),
            "{kind}"
        );
    }
}

#[test]
fn lengths_padding_and_values() {
    assert!(matches!(
        one(PING, 0, 0, &[0; 7]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    assert!(matches!(
        one(SETTINGS, ACK, 0, &[0; 6]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    assert!(matches!(
        one(SETTINGS, 0, 0, &[0; 5]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    assert!(matches!(
        one(RST_STREAM, 0, 1, &[0; 3]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    assert!(matches!(
        one(PRIORITY, 0, 1, &[0; 4]),
        Err(Error::Stream(1, Reason::FRAME_SIZE_ERROR, _))
    ));
    assert!(matches!(
        one(WINDOW_UPDATE, 0, 1, &[0; 4]),
        Err(Error::Stream(1, Reason::PROTOCOL_ERROR, _))
    ));
    assert!(matches!(
        one(WINDOW_UPDATE, 0, 0, &[0; 4]),
        Err(Error::Connection(Reason::PROTOCOL_ERROR, _))
    ));
    // Padding: the pad length counts against the payload, its own byte
    // included: 3 of a 4-byte payload is fine (no data), 4 is not.
    assert_eq!(
        one(DATA, PADDED, 1, &[2, b'a', 0, 0]),
        Ok(Frame::Data {
            stream: 1,
            data: b"a",
            end_stream: false,
            flow_len: 4
        })
    );
    assert_eq!(
        one(DATA, PADDED, 1, &[3, 0, 0, 0]),
        Ok(Frame::Data {
            stream: 1,
            data: b"",
            end_stream: false,
            flow_len: 4
        })
    );
    assert!(matches!(
        one(DATA, PADDED, 1, &[4, 0, 0, 0]),
        Err(Error::Connection(Reason::PROTOCOL_ERROR, _))
    ));
    assert!(matches!(
        one(DATA, PADDED, 1, &[]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    // A stream that depends on itself.
    assert!(matches!(
        one(PRIORITY, 0, 3, &[0, 0, 0, 3, 16]),
        Err(Error::Stream(3, Reason::PROTOCOL_ERROR, _))
    ));
    assert!(matches!(
        one(HEADERS, PRIORITY_FLAG, 3, &[0, 0, 0, 3]),
        Err(Error::Connection(Reason::FRAME_SIZE_ERROR, _))
    ));
    // Setting values.
    let setting_of = |id: u16, value: u32| {
        let mut p = id.to_be_bytes().to_vec();
        p.extend(value.to_be_bytes());
        p
    };
    assert!(one(SETTINGS, 0, 0, &setting_of(setting::ENABLE_PUSH, 2)).is_err());
    assert!(matches!(
        one(
            SETTINGS,
            0,
            0,
            &setting_of(setting::INITIAL_WINDOW_SIZE, 1 << 31)
        ),
        Err(Error::Connection(Reason::FLOW_CONTROL_ERROR, _))
    ));
    assert!(one(SETTINGS, 0, 0, &setting_of(setting::MAX_FRAME_SIZE, 16_383)).is_err());
    assert!(
        one(SETTINGS, 0, 0, &setting_of(0x99, 7)).is_ok(),
        "unknown settings are ignored"
    );
    assert_eq!(
        one(0xfa, 0, 9, b"x"),
        Ok(Frame::Unknown {
            kind: 0xfa,
            stream: 9
        })
    );
}
