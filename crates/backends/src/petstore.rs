//! The petstore of seeds/000, specified in specs/petstore.yaml.
//!
//! The list is fixed so that every benchmark response is byte-identical;
//! `POST /v1/pets` validates and echoes the pet without storing it.

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use serde_json::{json, Map, Value};

use crate::{
    message::{Request, Response},
    problem::{method_not_allowed, not_found, IntoResponse, Problem, Violation},
    request::parse_json,
};

/// The exact body of `GET /v1/pets`, as in seeds/000.
pub const PETS: &str =
    r#"[{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]"#;
const FIRST_PET: &str = r#"[{"id":1,"name":"catten","tag":"cat"}]"#;
const PET_1: &str = r#"{"id":1,"name":"catten","tag":"cat"}"#;
const PET_2: &str = r#"{"id":2,"name":"doggy","tag":"dog"}"#;
const MAX_LIMIT: u32 = 100;
const MAX_NAME_LEN: usize = 256;

pub(crate) fn handle(req: &Request<'_>) -> Response {
    let path = req.path;
    if path == "/v1/pets" {
        return match req.method {
            Method::GET | Method::HEAD => list(req.query),
            Method::POST => create(req),
            ref other => method_not_allowed(other, "GET, HEAD, POST"),
        };
    }
    if let Some(id) = path.strip_prefix("/v1/pets/") {
        if !id.contains('/') {
            return match req.method {
                Method::GET | Method::HEAD => show(id),
                ref other => method_not_allowed(other, "GET, HEAD"),
            };
        }
    }
    not_found(path)
}

fn list(query: Option<&str>) -> Response {
    let limit = match query.map(limit_param).unwrap_or(Ok(None)) {
        Ok(limit) => limit,
        Err(violation) => {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid query parameter")
                .with_errors(vec![violation])
                .into_response()
        }
    };
    let body = if limit == Some(1) { FIRST_PET } else { PETS };
    Response::json(StatusCode::OK, Bytes::from_static(body.as_bytes()))
}

/// `limit` (1..=100) from the query string; other parameters are ignored.
fn limit_param(query: &str) -> Result<Option<u32>, Violation> {
    let Some(raw) = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("limit="))
    else {
        return Ok(None);
    };
    match raw.parse::<u32>() {
        Ok(limit @ 1..=MAX_LIMIT) => Ok(Some(limit)),
        _ => Err(Violation::new(
            "/query/limit",
            format!("must be an integer from 1 to {MAX_LIMIT}, got `{raw}`"),
        )),
    }
}

fn show(id: &str) -> Response {
    let body = match id.parse::<u64>() {
        Ok(1) => PET_1,
        Ok(2) => PET_2,
        Ok(_) => return not_found(&format!("/v1/pets/{id}")),
        Err(_) => {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid path parameter")
                .with_errors(vec![Violation::new(
                    "/path/petId",
                    format!("must be a non-negative integer, got `{id}`"),
                )])
                .into_response()
        }
    };
    Response::json(StatusCode::OK, Bytes::from_static(body.as_bytes()))
}

fn create(req: &Request<'_>) -> Response {
    let value = match parse_json(req) {
        Ok(value) => value,
        Err(response) => return response,
    };
    match validate_pet(&value) {
        Ok(pet) => {
            let id = pet["id"].as_u64().unwrap_or_default();
            let response = Response::json(StatusCode::CREATED, Bytes::from(pet.to_string()));
            match HeaderValue::from_str(&format!("/v1/pets/{id}")) {
                Ok(location) => response.with_header(header::LOCATION, location),
                Err(_) => response,
            }
        }
        Err(errors) => Problem::new(StatusCode::BAD_REQUEST, "invalid pet")
            .with_errors(errors)
            .into_response(),
    }
}

/// Checks a pet against specs/petstore.yaml's `Pet` schema: `id` (integer >= 1)
/// and `name` (1..=256 characters) required, `tag` an optional string.
fn validate_pet(value: &Value) -> Result<Value, Vec<Violation>> {
    let Some(object) = value.as_object() else {
        return Err(vec![Violation::new("", "must be a JSON object")]);
    };
    let mut errors = Vec::new();
    let id = match object.get("id") {
        None => {
            errors.push(Violation::new("/id", "is required"));
            None
        }
        Some(id) => match id.as_u64() {
            Some(id) if id >= 1 => Some(id),
            _ => {
                errors.push(Violation::new("/id", "must be an integer >= 1"));
                None
            }
        },
    };
    let name = match object.get("name") {
        None => {
            errors.push(Violation::new("/name", "is required"));
            None
        }
        Some(Value::String(name)) if !name.is_empty() && name.chars().count() <= MAX_NAME_LEN => {
            Some(name)
        }
        Some(_) => {
            errors.push(Violation::new(
                "/name",
                format!("must be a string of 1 to {MAX_NAME_LEN} characters"),
            ));
            None
        }
    };
    let tag = match object.get("tag") {
        None | Some(Value::Null) => None,
        Some(Value::String(tag)) => Some(tag),
        Some(_) => {
            errors.push(Violation::new("/tag", "must be a string"));
            None
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut pet = Map::new();
    pet.insert("id".into(), json!(id));
    pet.insert("name".into(), json!(name));
    if let Some(tag) = tag {
        pet.insert("tag".into(), json!(tag));
    }
    Ok(Value::Object(pet))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_parameter() {
        assert_eq!(limit_param("limit=1"), Ok(Some(1)));
        assert_eq!(limit_param("a=b&limit=100"), Ok(Some(100)));
        assert_eq!(limit_param("other=1"), Ok(None));
        assert!(limit_param("limit=0").is_err());
        assert!(limit_param("limit=101").is_err());
        assert!(limit_param("limit=x").is_err());
    }

    #[test]
    fn pet_validation_names_each_field() {
        let errors = validate_pet(&json!({"id": "x", "tag": 3})).unwrap_err();
        let pointers: Vec<_> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(pointers, ["/id", "/name", "/tag"]);
        assert!(validate_pet(&json!([1])).is_err());
        assert!(validate_pet(&json!({"id": 0, "name": "a"})).is_err());
        assert!(validate_pet(&json!({"id": 3, "name": ""})).is_err());
        let pet = validate_pet(&json!({"id": 3, "name": "rex", "extra": true})).unwrap();
        assert_eq!(pet, json!({"id": 3, "name": "rex"}));
    }
}
