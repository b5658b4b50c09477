//! What the services share about reading requests: JSON media types and bodies.

use http::StatusCode;

use crate::{
    message::{Request, Response},
    problem::problem,
};

/// Largest request body any service accepts; the connection answers 413 past it.
pub const MAX_JSON_BODY: usize = 1024 * 1024;

/// True for `application/json` and any `application/*+json`, parameters ignored.
pub(crate) fn is_json(content_type: Option<&[u8]>) -> bool {
    let Some(value) = content_type.and_then(|v| std::str::from_utf8(v).ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype.len() > 5 && subtype[subtype.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// The body of a request that must carry JSON; 415 otherwise.
pub(crate) fn json_body<'a>(req: &Request<'a>) -> Result<&'a [u8], Response> {
    if is_json(req.content_type) {
        Ok(req.body)
    } else {
        Err(problem(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "request body must be application/json",
        ))
    }
}

/// Parses a JSON request body, answering 415 for another media type and 400
/// with serde's line and column when it is malformed.
pub(crate) fn parse_json(req: &Request<'_>) -> Result<serde_json::Value, Response> {
    serde_json::from_slice(json_body(req)?).map_err(|err| {
        problem(
            StatusCode::BAD_REQUEST,
            format!("malformed JSON body: {err}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types() {
        let json = |v: &str| is_json(Some(v.as_bytes()));
        assert!(json("application/json"));
        assert!(json("Application/JSON; charset=utf-8"));
        assert!(json("application/problem+json"));
        assert!(!json("text/plain"));
        assert!(!json("application/jsonx"));
        assert!(!json("+json"));
        assert!(!is_json(None));
    }
}
