//! The PROXY protocol reader of listeners with `proxy_protocol`
//! (crates/proxy/src/wire/proxy_protocol). The input is the first bytes
//! of a connection.
//!
//! - A header is read from the bytes it spans and no more: the same
//!   header from exactly its bytes, from them with anything after, and
//!   from any prefix that already held it whole; a shorter prefix is
//!   still waiting (never an error the whole input does not give).
//! - The reader's byte-exact loop (take `header_extent`, parse, repeat),
//!   fed the input a byte at a time, ends where `parse` of the whole
//!   does: the same header, the same refusal, or still waiting, and it
//!   never takes a byte past the header.
//! - A listener accepting one version refuses the other's header as
//!   `Version`, and reads its own as `Any` does.
//! - A header's addresses written again by the proxy's own writer, in
//!   its version, read back the same.

use proxy::wire::proxy_protocol::{
    header_extent, parse, start, write_v1, write_v2, Header, Invalid, Start, Versions,
};

pub fn check(data: &[u8]) {
    let whole = parse(data, Versions::Any);
    let begins = matches!(start(data), Start::V1 | Start::V2 | Start::Undecided);
    if begins {
        let extent = header_extent(data);
        assert!(extent <= data.len());
        assert!(data.is_empty() || extent > 0, "a reader would take nothing");
        if let Ok(Some(header)) = &whole {
            assert!(
                extent >= header.len,
                "the reader would stop short of the header"
            );
        }
    }
    if let Ok(Some(header)) = &whole {
        assert!(header.len <= data.len());
        assert_eq!(
            parse(&data[..header.len], Versions::Any),
            Ok(Some(header.clone()))
        );
        let mut more = data.to_vec();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse(&more, Versions::Any), Ok(Some(header.clone())));
        versions_agree(data, header);
        written_again(header);
    }
    // Prefixes: waiting until the header (or the refusal) is there.
    for cut in 0..data.len().min(256) {
        match parse(&data[..cut], Versions::Any) {
            Ok(None) => {}
            Ok(Some(header)) => assert_eq!(whole, Ok(Some(header))),
            Err(err) => assert_eq!(whole.clone().err(), Some(err), "refused early"),
        }
    }
    if begins {
        assert_eq!(byte_exact(data), whole);
    }
}

/// The listener's loop before TLS: each round takes what `header_extent`
/// says of the bytes available (here: one more byte arrives per round).
fn byte_exact(data: &[u8]) -> Result<Option<Header>, Invalid> {
    let mut taken: Vec<u8> = Vec::new();
    for arrived in 1..=data.len() {
        let seen = &data[taken.len()..arrived];
        let mut view = taken.clone();
        view.extend_from_slice(seen);
        let extent = header_extent(&view);
        assert!(extent <= view.len());
        taken = view[..extent].to_vec();
        match parse(&taken, Versions::Any) {
            Ok(None) => {}
            done => {
                if let Ok(Some(header)) = &done {
                    assert_eq!(taken.len(), header.len, "took bytes past the header");
                }
                return done;
            }
        }
        if taken.len() < arrived {
            // Bytes past a finished extent: only when the header ended.
            unreachable!("the reader stopped without a header");
        }
    }
    Ok(None)
}

fn versions_agree(data: &[u8], header: &Header) {
    let (own, other) = match header.version {
        1 => (Versions::V1, Versions::V2),
        _ => (Versions::V2, Versions::V1),
    };
    assert_eq!(parse(data, own), Ok(Some(header.clone())));
    assert_eq!(parse(data, other), Err(Invalid::Version));
}

fn written_again(header: &Header) {
    let mut out = Vec::new();
    match header.version {
        1 => write_v1(&mut out, header.addresses),
        _ => write_v2(&mut out, header.addresses, &[]),
    }
    let again = parse(&out, Versions::Any)
        .expect("the writer's header reads")
        .expect("whole");
    assert_eq!(again.len, out.len());
    assert_eq!(again.addresses, header.addresses);
}
