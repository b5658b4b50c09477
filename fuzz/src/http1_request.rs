//! The shared HTTP/1.1 request parser and chunked decoder: any bytes give
//! a head, a request for more input, or a rejection with a 4xx status;
//! never a panic, and every range returned lies inside the input.

use http1::{parse_head_into, ChunkedDecoder, Field, Framing, Limits};

const LIMITS: Limits = Limits {
    max_head: 8 * 1024,
    max_body: 64 * 1024,
};

pub fn check(data: &[u8]) {
    let mut fields: Vec<Field> = Vec::new();
    match parse_head_into(data, &LIMITS, &mut fields) {
        Ok(Some(head)) => {
            assert!(head.len <= data.len());
            let ranges = [
                Some(head.target.clone()),
                Some(head.path.clone()),
                head.query.clone(),
                head.content_type.clone(),
                head.host.clone(),
            ];
            for range in ranges
                .into_iter()
                .flatten()
                .chain(fields.iter().flat_map(|(n, v)| [n.clone(), v.clone()]))
            {
                assert!(range.start <= range.end && range.end <= head.len);
            }
            if head.framing == Framing::Chunked {
                // Fed in two parts, as if split across reads.
                let body = &data[head.len..];
                let mut decoder = ChunkedDecoder::default();
                let mut decoded_len = 0;
                if let Ok(first) =
                    decoder.decode(&body[..body.len() / 2], &LIMITS, |d| decoded_len += d.len())
                {
                    assert!(first.consumed <= body.len() / 2);
                    if let Ok(second) =
                        decoder.decode(&body[first.consumed..], &LIMITS, |d| decoded_len += d.len())
                    {
                        assert!(first.consumed + second.consumed <= body.len());
                    }
                }
                assert!(decoded_len <= LIMITS.max_body);
                assert_eq!(decoded_len, decoder.data_len());
            }
        }
        Ok(None) => assert!(data.len() <= LIMITS.max_head),
        Err(rejection) => assert!(rejection.status.is_client_error()),
    }
}
