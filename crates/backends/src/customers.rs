//! The customers REST API of seeds/004: a registry shared by all workers.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
};

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use serde::Serialize;
use serde_json::Value;

use crate::{
    message::{Request, Response},
    problem::{method_not_allowed, not_found, problem, IntoResponse, Problem, Violation},
    request::parse_json,
};

/// How many customers `GET /customers` lists.
const LISTED: usize = 10;
/// Registered customers kept; past it the oldest are forgotten so that a long
/// benchmark cannot grow memory without bound.
pub const CAPACITY: usize = 1_000_000;
const MAX_TEXT_LEN: usize = 256;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
struct Customer {
    id: u64,
    name: String,
    email: String,
}

#[derive(Debug)]
struct Registry {
    by_id: HashMap<u64, Customer>,
    /// Registration order, oldest first.
    order: VecDeque<u64>,
    /// `GET /customers`, rendered once per registration rather than per read.
    listing: Bytes,
}

/// The customer registry; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Customers {
    registry: Arc<Mutex<Registry>>,
}

impl Customers {
    /// A registry holding customers 1 to 10.
    pub(crate) fn seeded() -> Self {
        let mut registry = Registry {
            by_id: HashMap::new(),
            order: VecDeque::new(),
            listing: Bytes::new(),
        };
        for id in 1..=LISTED as u64 {
            registry.insert(Customer {
                id,
                name: format!("Customer {id}"),
                email: format!("customer{id}@example.com"),
            });
        }
        Self {
            registry: Arc::new(Mutex::new(registry)),
        }
    }

    pub(crate) fn handle(&self, req: &Request<'_>) -> Response {
        let path = req.path;
        if path == "/customers" {
            return match req.method {
                Method::GET | Method::HEAD => {
                    Response::json(StatusCode::OK, self.lock().listing.clone())
                }
                Method::POST => self.register(req),
                ref other => method_not_allowed(other, "GET, HEAD, POST"),
            };
        }
        if let Some(id) = path.strip_prefix("/customers/") {
            if !id.contains('/') {
                return match req.method {
                    Method::GET | Method::HEAD => self.show(id),
                    ref other => method_not_allowed(other, "GET, HEAD"),
                };
            }
        }
        not_found(path)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        // The registry stays consistent even if a holder panicked: every
        // mutation completes before the guard is released.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn show(&self, id: &str) -> Response {
        let Ok(numeric) = id.parse::<u64>() else {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid path parameter")
                .with_errors(vec![Violation::new(
                    "/path/id",
                    format!("must be a non-negative integer, got `{id}`"),
                )])
                .into_response();
        };
        let found = self.lock().by_id.get(&numeric).map(to_json);
        match found {
            Some(body) => Response::json(StatusCode::OK, body),
            None => not_found(&format!("/customers/{id}")),
        }
    }

    fn register(&self, req: &Request<'_>) -> Response {
        let customer = match parse_json(req).map(|value| validate(&value)) {
            Ok(Ok(customer)) => customer,
            Ok(Err(errors)) => {
                return Problem::new(StatusCode::BAD_REQUEST, "invalid customer")
                    .with_errors(errors)
                    .into_response()
            }
            Err(response) => return response,
        };
        let id = customer.id;
        let body = to_json(&customer);
        if !self.lock().insert(customer) {
            return problem(
                StatusCode::CONFLICT,
                format!("a customer with id {id} is already registered"),
            );
        }
        let response = Response::json(StatusCode::CREATED, body);
        match HeaderValue::from_str(&format!("/customers/{id}")) {
            Ok(location) => response.with_header(header::LOCATION, location),
            Err(_) => response,
        }
    }
}

impl Registry {
    /// Adds a customer unless its id is taken; returns whether it was added.
    fn insert(&mut self, customer: Customer) -> bool {
        if self.by_id.contains_key(&customer.id) {
            return false;
        }
        if self.order.len() == CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.by_id.remove(&oldest);
            }
        }
        self.order.push_back(customer.id);
        self.by_id.insert(customer.id, customer);
        self.render_listing();
        true
    }

    /// The newest [`LISTED`] customers, newest first.
    fn render_listing(&mut self) {
        let newest: Vec<&Customer> = self
            .order
            .iter()
            .rev()
            .take(LISTED)
            .filter_map(|id| self.by_id.get(id))
            .collect();
        self.listing = Bytes::from(serde_json::to_vec(&newest).unwrap_or_default());
    }
}

fn to_json(customer: &Customer) -> Bytes {
    Bytes::from(serde_json::to_vec(customer).unwrap_or_default())
}

/// `id` (integer >= 1), `name` (1..=256 characters) and `email` (with an `@`) are required.
fn validate(value: &Value) -> Result<Customer, Vec<Violation>> {
    let Some(object) = value.as_object() else {
        return Err(vec![Violation::new("", "must be a JSON object")]);
    };
    let mut errors = Vec::new();
    let id = match object.get("id").map(Value::as_u64) {
        Some(Some(id)) if id >= 1 => id,
        None => {
            errors.push(Violation::new("/id", "is required"));
            0
        }
        Some(_) => {
            errors.push(Violation::new("/id", "must be an integer >= 1"));
            0
        }
    };
    let name = text_field(object, "name", |_| true, &mut errors);
    let email = text_field(
        object,
        "email",
        |email| {
            email
                .split_once('@')
                .is_some_and(|(user, host)| !user.is_empty() && !host.is_empty())
        },
        &mut errors,
    );
    if errors.is_empty() {
        Ok(Customer { id, name, email })
    } else {
        Err(errors)
    }
}

fn text_field(
    object: &serde_json::Map<String, Value>,
    field: &str,
    valid: impl Fn(&str) -> bool,
    errors: &mut Vec<Violation>,
) -> String {
    match object.get(field) {
        None => errors.push(Violation::new(format!("/{field}"), "is required")),
        Some(Value::String(text))
            if !text.is_empty() && text.chars().count() <= MAX_TEXT_LEN && valid(text) =>
        {
            return text.clone()
        }
        Some(_) => errors.push(Violation::new(
            format!("/{field}"),
            format!("must be a valid {field} of 1 to {MAX_TEXT_LEN} characters"),
        )),
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listing_shows_newest_ten_first() {
        let customers = Customers::seeded();
        let mut registry = customers.lock();
        assert!(registry.insert(Customer {
            id: 11,
            name: "n".into(),
            email: "a@b".into()
        }));
        let listing: Vec<Value> = serde_json::from_slice(&registry.listing).unwrap();
        assert_eq!(listing.len(), 10);
        assert_eq!(listing[0]["id"], 11);
        assert_eq!(listing[9]["id"], 2);
        assert!(!registry.insert(Customer {
            id: 11,
            name: "dup".into(),
            email: "a@b".into()
        }));
    }

    #[test]
    fn validation_names_fields() {
        let errors = validate(&json!({"id": -1, "name": "", "email": "nope"})).unwrap_err();
        let pointers: Vec<_> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(pointers, ["/id", "/name", "/email"]);
        assert!(validate(&json!({"id": 1, "name": "a", "email": "a@b"})).is_ok());
    }
}
