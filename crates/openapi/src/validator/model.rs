//! The compiled form of a spec: its paths, their operations, and the
//! parameter, body and response rules of each operation.

use crate::param::Param;
use crate::router::Router;
use crate::schema::SchemaCheck;

/// Operation keys of a Path Item, in the order `Allow` lists them.
pub(super) const METHODS: [(&str, &str); 8] = [
    ("get", "GET"),
    ("put", "PUT"),
    ("post", "POST"),
    ("delete", "DELETE"),
    ("options", "OPTIONS"),
    ("head", "HEAD"),
    ("patch", "PATCH"),
    ("trace", "TRACE"),
];

pub(super) fn method_index(method: &str) -> Option<usize> {
    Some(match method {
        "GET" => 0,
        "PUT" => 1,
        "POST" => 2,
        "DELETE" => 3,
        "OPTIONS" => 4,
        "HEAD" => 5,
        "PATCH" => 6,
        "TRACE" => 7,
        _ => return None,
    })
}

/// What compiling a spec gives: the router over its path templates, the
/// path entries it routes to, their operations, and the warnings.
#[derive(Debug, Default)]
pub(super) struct CompiledSpec {
    pub(super) router: Router,
    pub(super) paths: Vec<PathEntry>,
    pub(super) operations: Vec<Operation>,
    pub(super) warnings: Vec<String>,
}

#[derive(Debug)]
pub(super) struct PathEntry {
    pub(super) template: Box<str>,
    /// Index into `operations`, per method of [`METHODS`].
    pub(super) operations: [Option<usize>; 8],
    pub(super) allow: Box<str>,
}

#[derive(Debug)]
pub(super) struct Operation {
    pub(super) template: Box<str>,
    pub(super) operation_id: Option<Box<str>>,
    /// By template expression, in template order; `None`: not declared.
    pub(super) path: Vec<Option<Param>>,
    pub(super) query: Vec<Param>,
    pub(super) query_collects: bool,
    pub(super) headers: Vec<Param>,
    pub(super) cookies: Vec<Param>,
    pub(super) body: Option<BodyRule>,
    /// A `HEAD` operation: its responses have no body.
    pub(super) head: bool,
    /// `None`: responses are not validated, or the operation declares none.
    pub(super) responses: Option<Responses>,
}

/// The compiled `responses` of an operation.
#[derive(Debug, Default)]
pub(super) struct Responses {
    /// By exact status code.
    pub(super) exact: Vec<(u16, ResponseRule)>,
    /// `1XX` to `5XX`.
    pub(super) ranges: [Option<ResponseRule>; 5],
    pub(super) default: Option<ResponseRule>,
    /// `200, 4XX, default`
    pub(super) declared: Box<str>,
}

impl Responses {
    /// The response declared for `status`: exact code, then range, then `default`.
    pub(super) fn find(&self, status: u16) -> Option<&ResponseRule> {
        if let Some((_, rule)) = self.exact.iter().find(|(code, _)| *code == status) {
            return Some(rule);
        }
        let class = usize::from(status / 100);
        class
            .checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .and_then(Option::as_ref)
            .or(self.default.as_ref())
    }
}

#[derive(Debug)]
pub(super) struct ResponseRule {
    /// Empty: the response declares no content.
    pub(super) media: Vec<MediaRule>,
    /// `application/json, text/plain`
    pub(super) declared: Box<str>,
    /// Some media type has a schema check.
    pub(super) wants_body: bool,
}

#[derive(Debug)]
pub(super) struct BodyRule {
    pub(super) required: bool,
    pub(super) media: Vec<MediaRule>,
    /// `application/json, text/plain`
    pub(super) accepted: Box<str>,
    pub(super) needs_body: bool,
}

#[derive(Debug)]
pub(super) struct MediaRule {
    /// Lower case; `*` for wildcards.
    pub(super) main: Box<str>,
    pub(super) sub: Box<str>,
    /// The schema check, for JSON bodies.
    pub(super) check: Option<SchemaCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(declared: &str) -> ResponseRule {
        ResponseRule {
            media: Vec::new(),
            declared: declared.into(),
            wants_body: false,
        }
    }

    #[test]
    fn methods_index_in_allow_order_and_are_case_sensitive() {
        for (i, (_, upper)) in METHODS.iter().enumerate() {
            assert_eq!(method_index(upper), Some(i), "{upper}");
        }
        assert_eq!(method_index("get"), None);
        assert_eq!(method_index("CONNECT"), None);
    }

    #[test]
    fn a_status_finds_its_code_then_its_range_then_default() {
        let mut responses = Responses {
            exact: vec![(404, rule("404"))],
            ..Responses::default()
        };
        responses.ranges[3] = Some(rule("4XX"));
        responses.ranges[1] = Some(rule("2XX"));
        let found = |r: &Responses, status| r.find(status).map(|rule| rule.declared.to_string());
        assert_eq!(found(&responses, 404).as_deref(), Some("404"));
        assert_eq!(found(&responses, 400).as_deref(), Some("4XX"));
        assert_eq!(found(&responses, 201).as_deref(), Some("2XX"));
        assert_eq!(found(&responses, 500), None);
        assert_eq!(found(&responses, 600), None);
        assert_eq!(found(&responses, 42), None);
        responses.default = Some(rule("default"));
        assert_eq!(found(&responses, 500).as_deref(), Some("default"));
        assert_eq!(found(&responses, 42).as_deref(), Some("default"));
        assert_eq!(found(&responses, 404).as_deref(), Some("404"));
    }
}
