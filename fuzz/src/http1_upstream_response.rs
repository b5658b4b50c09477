//! The proxy's upstream response head parser: any bytes give a head, a
//! request for more input, or a 502; never a panic, and every field range
//! lies inside the head.

use http1::{parse_response_head, Field};

pub fn check(data: &[u8]) {
    let mut fields: Vec<Field> = Vec::new();
    let head_request = data.first().is_some_and(|b| b & 1 == 1);
    match parse_response_head(data, 8 * 1024, head_request, &mut fields) {
        Ok(Some(head)) => {
            assert!(head.len <= data.len());
            for (name, value) in &fields {
                assert!(name.end <= head.len && value.end <= head.len);
            }
        }
        Ok(None) => assert!(data.len() <= 8 * 1024),
        Err(rejection) => assert_eq!(rejection.status, 502),
    }
}
