//! The slow downstream of seeds/003: `POST /messages` answers after `delay`
//! milliseconds, on a timer rather than a blocked thread.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{
    message::{Request, Response},
    problem::{method_not_allowed, not_found, IntoResponse, Problem, Violation},
    request::parse_json,
};

/// Longest delay a message may ask for, in milliseconds.
pub const MAX_DELAY_MS: u64 = 60_000;

pub(crate) async fn handle(req: &Request<'_>) -> Response {
    if req.path != "/messages" {
        return not_found(req.path);
    }
    if req.method != Method::POST {
        return method_not_allowed(&req.method, "POST");
    }
    let (id, delay) = match parse_json(req).map(|value| validate(&value)) {
        Ok(Ok(message)) => message,
        Ok(Err(errors)) => {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid message")
                .with_errors(errors)
                .into_response()
        }
        Err(response) => return response,
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let ack = json!({ "id": id, "received": true });
    Response::json(StatusCode::OK, Bytes::from(ack.to_string()))
}

/// `id` (string or integer) is required; `delay` is 0..=60000 ms, default 0;
/// `payload` is anything and is not inspected.
fn validate(value: &Value) -> Result<(Value, Duration), Vec<Violation>> {
    let Some(object) = value.as_object() else {
        return Err(vec![Violation::new("", "must be a JSON object")]);
    };
    let mut errors = Vec::new();
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        Some(_) => {
            errors.push(Violation::new("/id", "must be a string or a number"));
            Value::Null
        }
        None => {
            errors.push(Violation::new("/id", "is required"));
            Value::Null
        }
    };
    let delay = match object.get("delay") {
        None | Some(Value::Null) => 0,
        Some(delay) => match delay.as_u64() {
            Some(ms) if ms <= MAX_DELAY_MS => ms,
            _ => {
                errors.push(Violation::new(
                    "/delay",
                    format!("must be an integer from 0 to {MAX_DELAY_MS} (milliseconds)"),
                ));
                0
            }
        },
    };
    if errors.is_empty() {
        Ok((id, Duration::from_millis(delay)))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_validation() {
        let (id, delay) = validate(&json!({"id": "1", "payload": "x", "delay": 300})).unwrap();
        assert_eq!(id, json!("1"));
        assert_eq!(delay, Duration::from_millis(300));
        assert_eq!(validate(&json!({"id": 7})).unwrap().1, Duration::ZERO);
        for bad in [
            json!({"id": "1", "delay": 60_001}),
            json!({"id": "1", "delay": -1}),
            json!({"id": "1", "delay": 1.5}),
        ] {
            assert_eq!(validate(&bad).unwrap_err()[0].pointer, "/delay");
        }
        assert_eq!(
            validate(&json!({"delay": 1})).unwrap_err()[0].pointer,
            "/id"
        );
        assert!(validate(&json!("text")).is_err());
    }
}
