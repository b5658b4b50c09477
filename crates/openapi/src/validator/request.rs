//! Checking a matched request: its path, query, header and cookie
//! parameters, and its body.

use super::media::{check_json, is_json, media_rule};
use super::model::{BodyRule, Operation};
use super::occurrence::{finish_items, Occurrences};
use crate::param::{Layout, Param, Shape};
use crate::router::Captures;
use crate::text::decode_text;
use crate::{Headers, Outcome, Request, Violations};

/// Checks every parameter of `operation`: path ones from the `captures`
/// into `path` (the request path without the base path), then query,
/// header and cookie ones from `request`.
pub(super) fn check_parameters(
    operation: &Operation,
    path: &[u8],
    captures: &Captures,
    request: &Request<'_>,
    out: &mut Violations,
) {
    for (i, slot) in operation.path.iter().enumerate() {
        let Some(param) = slot else { continue };
        let Some(&(start, end)) = captures.ranges.get(i).filter(|_| i < captures.len) else {
            continue;
        };
        let raw = path.get(start as usize..end as usize).unwrap_or_default();
        let mut state = Occurrences::default();
        match decode_text(raw, false) {
            Ok(value) => state.occurrence(param, &value, out),
            Err(why) => out.add(&param.pointer, None, format!("value {why}")),
        }
        state.finish(param, out);
    }
    if !operation.query.is_empty() {
        check_query(operation, request.query, out);
    }
    for param in &operation.headers {
        check_header(param, request.headers, out);
    }
    for param in &operation.cookies {
        check_cookie(param, request.headers, out);
    }
}

/// Checks the body against the operation's `rule`; `Some` for outcomes
/// that are not a list of violations (413, 415).
pub(super) fn check_body<'v>(
    rule: &'v BodyRule,
    max_body_bytes: usize,
    content_type: Option<&[u8]>,
    body: Option<&[u8]>,
    out: &mut Violations,
) -> Option<Outcome<'v>> {
    let present = match body {
        Some(bytes) => !bytes.is_empty(),
        None => content_type.is_some(),
    };
    if !present {
        if rule.required {
            out.add("/body", None, "a request body is required".to_owned());
        }
        return None;
    }
    if let Some(bytes) = body {
        if bytes.len() > max_body_bytes {
            return Some(Outcome::PayloadTooLarge {
                limit: max_body_bytes,
            });
        }
    }
    let content_type = content_type.unwrap_or(b"application/octet-stream");
    let Some(media) = media_rule(&rule.media, content_type) else {
        return Some(Outcome::UnsupportedMediaType {
            accepted: &rule.accepted,
        });
    };
    let (Some(check), Some(bytes)) = (&media.check, body) else {
        return None;
    };
    if is_json(content_type) {
        check_json(check, bytes, out);
    }
    None
}

fn check_query(operation: &Operation, query: Option<&[u8]>, out: &mut Violations) {
    let params = &operation.query;
    let mut states: Vec<Occurrences> = Vec::new();
    let mut counts_small = [0u32; 16];
    let use_states = operation.query_collects || params.len() > counts_small.len();
    if use_states {
        states = params.iter().map(|_| Occurrences::default()).collect();
    }
    // Without collecting parameters an `Occurrences` is just counters: keep those on
    // the stack and build the `Occurrences` for the one parameter being checked.
    for pair in query.unwrap_or_default().split(|&b| b == b'&') {
        if pair.is_empty() {
            continue;
        }
        let (raw_name, raw_value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &b""[..]),
        };
        let Some(index) = find_param(params, raw_name) else {
            continue;
        };
        let param = &params[index];
        let value = match decode_text(raw_value, true) {
            Ok(value) => value,
            Err(why) => {
                out.add(&param.pointer, None, format!("value {why}"));
                continue;
            }
        };
        if use_states {
            states[index].occurrence(param, &value, out);
        } else {
            let nth = counts_small[index];
            let mut state = Occurrences {
                count: nth,
                items: u64::from(nth),
                collected: Vec::new(),
            };
            state.occurrence(param, &value, out);
            counts_small[index] = state.count;
            if let Shape::Array {
                layout: Layout::Delimited(_),
                ..
            } = param.shape
            {
                // A delimited array occurs once; its item count is checked here.
                if nth == 0 {
                    finish_items(param, state.items, out);
                }
            }
        }
    }
    if use_states {
        for (param, state) in params.iter().zip(states) {
            state.finish(param, out);
        }
    } else {
        for (param, &count) in params.iter().zip(&counts_small) {
            if count == 0 {
                if param.required {
                    out.add(
                        &param.pointer,
                        None,
                        "a required parameter is missing".to_owned(),
                    );
                }
            } else if let Shape::Array {
                layout: Layout::Exploded,
                ..
            } = param.shape
            {
                finish_items(param, u64::from(count), out);
            }
        }
    }
}

/// The declared query parameter a raw name refers to.
fn find_param(params: &[Param], raw_name: &[u8]) -> Option<usize> {
    if !raw_name.iter().any(|&b| b == b'%' || b == b'+') {
        return params.iter().position(|p| p.name.as_bytes() == raw_name);
    }
    let name = decode_text(raw_name, true).ok()?;
    params.iter().position(|p| *p.name == *name)
}

fn check_header(param: &Param, headers: Headers<'_>, out: &mut Violations) {
    let mut state = Occurrences::default();
    for (name, value) in headers.iter() {
        if !name.eq_ignore_ascii_case(param.name.as_bytes()) {
            continue;
        }
        match std::str::from_utf8(value) {
            Ok(value) => state.occurrence(param, value.trim_ascii(), out),
            Err(_) => {
                state.count += 1;
                out.add(&param.pointer, None, "value is not valid UTF-8".to_owned());
            }
        }
    }
    state.finish(param, out);
}

fn check_cookie(param: &Param, headers: Headers<'_>, out: &mut Violations) {
    let mut state = Occurrences::default();
    for (name, value) in headers.iter() {
        if !name.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        for pair in value.split(|&b| b == b';') {
            let pair = pair.trim_ascii();
            let (cookie_name, cookie_value) = match pair.iter().position(|&b| b == b'=') {
                Some(eq) => (&pair[..eq], &pair[eq + 1..]),
                None => continue,
            };
            if cookie_name != param.name.as_bytes() {
                continue;
            }
            match std::str::from_utf8(cookie_value) {
                Ok(value) => state.occurrence(param, value, out),
                Err(_) => {
                    state.count += 1;
                    out.add(&param.pointer, None, "value is not valid UTF-8".to_owned());
                }
            }
        }
    }
    state.finish(param, out);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validator::compile::compiled_paths;
    use crate::validator::model::CompiledSpec;

    fn operation(parameters: serde_json::Value) -> CompiledSpec {
        compiled_paths(json!({ "/a": { "post": {
            "parameters": parameters,
            "requestBody": { "required": true, "content": {
                "application/json": { "schema": { "type": "object", "required": ["id"] } },
                "text/plain": {},
            } },
        } } }))
        .unwrap()
    }

    fn pointers_and_messages(out: Violations) -> Vec<String> {
        out.into_vec()
            .into_iter()
            .map(|v| format!("{}: {}", v.pointer, v.message))
            .collect()
    }

    #[test]
    fn query_names_and_values_are_percent_decoded() {
        let compiled = operation(json!([
            { "name": "a b", "in": "query", "required": true, "schema": { "type": "string", "maxLength": 3 } },
            { "name": "n", "in": "query", "schema": { "type": "integer" } },
        ]));
        let check = |query: &str| {
            let mut out = Violations::default();
            check_query(&compiled.operations[0], Some(query.as_bytes()), &mut out);
            pointers_and_messages(out)
        };
        assert_eq!(check("a+b=x%20y&n=1&other=%zz"), Vec::<String>::new());
        assert_eq!(
            check("a%20b=abcd"),
            [r#"/query/a b: "abcd" is longer than 3 characters"#]
        );
        assert_eq!(
            check("n=%zz"),
            [
                "/query/n: value has an invalid percent-encoding",
                "/query/a b: a required parameter is missing",
            ]
        );
        assert_eq!(check("a+b=1&n=1&n=2&&"), ["/query/n: must not be repeated"]);
    }

    #[test]
    fn headers_and_cookies_are_found_by_name() {
        let compiled = operation(json!([
            { "name": "X-Ids", "in": "header", "schema": { "type": "array", "items": { "type": "integer" } } },
            { "name": "sid", "in": "cookie", "required": true, "schema": { "type": "string", "minLength": 2 } },
        ]));
        let operation = &compiled.operations[0];
        let check = |fields: &[(&[u8], &[u8])]| {
            let mut out = Violations::default();
            check_header(&operation.headers[0], Headers::Pairs(fields), &mut out);
            check_cookie(&operation.cookies[0], Headers::Pairs(fields), &mut out);
            pointers_and_messages(out)
        };
        // A header list continues over field lines; items are trimmed.
        let fine: &[(&[u8], &[u8])] = &[
            (b"x-ids", b"1, 2"),
            (b"X-IDS", b" 3"),
            (b"Cookie", b"a=1; sid=ok; b"),
        ];
        assert_eq!(check(fine), Vec::<String>::new());
        let bad: &[(&[u8], &[u8])] = &[(b"x-ids", b"1,x"), (b"cookie", b"SID=xyz; sid=x")];
        assert_eq!(
            check(bad),
            [
                r#"/header/x-ids/1: "x" is not an integer"#,
                r#"/cookie/sid: "x" is shorter than 2 characters"#,
            ]
        );
        assert_eq!(
            check(&[(b"cookie", b"sid=\xff")]),
            ["/cookie/sid: value is not valid UTF-8"]
        );
        assert_eq!(check(&[]), ["/cookie/sid: a required parameter is missing"]);
    }

    #[test]
    fn bodies_by_presence_size_and_media_type() {
        let compiled = operation(json!([]));
        let rule = compiled.operations[0].body.as_ref().unwrap();
        let check = |content_type: Option<&str>, body: Option<&str>| {
            let mut out = Violations::default();
            let early = check_body(
                rule,
                8,
                content_type.map(str::as_bytes),
                body.map(str::as_bytes),
                &mut out,
            );
            (early, pointers_and_messages(out))
        };
        let json = Some("application/json");
        assert_eq!(check(json, Some(r#"{"id":1}"#)), (None, vec![]));
        assert_eq!(
            check(None, Some("")),
            (None, vec!["/body: a request body is required".to_owned()])
        );
        assert_eq!(
            check(json, Some("{}")).1,
            [r#"/body: "id" is a required property"#]
        );
        assert_eq!(
            check(json, Some(r#"{"id":12345}"#)).0,
            Some(Outcome::PayloadTooLarge { limit: 8 })
        );
        assert_eq!(
            check(Some("image/png"), Some("x")).0,
            Some(Outcome::UnsupportedMediaType {
                accepted: "application/json, text/plain"
            })
        );
        // Not buffered: only the media type is checked.
        assert_eq!(check(json, None), (None, vec![]));
        assert_eq!(check(Some("text/plain"), Some("{")), (None, vec![]));
    }
}
