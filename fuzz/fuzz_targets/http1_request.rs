//! The backends' HTTP/1.1 request parser: any bytes give a head, a request
//! for more input, or a rejection with a 4xx status; never a panic, and
//! every range it returns lies inside the input.
#![no_main]

use backends::http1::codec::{parse_head, ChunkedDecoder, Framing, Limits};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits {
    max_head: 8 * 1024,
    max_body: 64 * 1024,
};

fuzz_target!(|data: &[u8]| {
    match parse_head(data, &LIMITS) {
        Ok(Some(head)) => {
            assert!(head.len <= data.len());
            for range in [Some(head.path.clone()), head.query.clone(), head.content_type.clone()]
                .into_iter()
                .flatten()
            {
                assert!(range.start <= range.end && range.end <= head.len);
            }
            if head.framing == Framing::Chunked {
                // Fed in two parts, as if split across reads.
                let body = &data[head.len..];
                let mut decoder = ChunkedDecoder::default();
                let first = decoder.decode(&body[..body.len() / 2], &LIMITS);
                if let Ok(None) = first {
                    if let Ok(Some(consumed)) = decoder.decode(body, &LIMITS) {
                        assert!(consumed <= body.len());
                    }
                }
                assert!(decoder.body.len() <= LIMITS.max_body);
            }
        }
        Ok(None) => assert!(data.len() <= LIMITS.max_head),
        Err(rejection) => assert!(rejection.status.is_client_error()),
    }
});
