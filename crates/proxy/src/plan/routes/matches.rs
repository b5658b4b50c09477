//! What a route asks of a request besides its host and path: the method,
//! header fields and query parameters. Pure functions over the request's
//! head (`Facts`), whatever protocol carried it.

use std::borrow::Cow;

use http::Method;

use crate::config::{FieldMatchSettings, Pattern};
use crate::wire::fields::Fields;

/// The parts of a request routing reads, normalised.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The normalised host name (no port, lower case, A-labels).
    pub host: Option<&'a str>,
    pub method: &'a Method,
    /// The normalised path routes are matched against.
    pub path: &'a str,
    /// The query as sent, without `?`.
    pub query: Option<&'a [u8]>,
    pub fields: Fields<'a>,
}

/// One header or query parameter condition.
#[derive(Debug, Clone)]
pub(crate) struct FieldMatch {
    /// Lower case for a header (any case matches); as written for a
    /// query parameter (its case counts).
    name: String,
    test: Test,
}

#[derive(Debug, Clone)]
enum Test {
    Exact(String),
    Regex(Pattern),
    Present(bool),
}

impl FieldMatch {
    pub(crate) fn header(settings: &FieldMatchSettings) -> Self {
        Self::new(settings, settings.name.to_ascii_lowercase())
    }

    pub(crate) fn query(settings: &FieldMatchSettings) -> Self {
        Self::new(settings, settings.name.clone())
    }

    fn new(settings: &FieldMatchSettings, name: String) -> Self {
        let test = match (&settings.value, &settings.regex, settings.present) {
            (Some(value), _, _) => Test::Exact(value.clone()),
            (None, Some(regex), _) => Test::Regex(regex.0.clone()),
            (None, None, present) => Test::Present(present.unwrap_or(true)),
        };
        Self { name, test }
    }

    /// Whether `value` (the field's, or `None` when absent) passes.
    fn passes(&self, value: Option<&[u8]>) -> bool {
        match (&self.test, value) {
            (Test::Present(wanted), value) => *wanted == value.is_some(),
            (_, None) => false,
            (Test::Exact(wanted), Some(value)) => value == wanted.as_bytes(),
            (Test::Regex(pattern), Some(value)) => {
                std::str::from_utf8(value).is_ok_and(|value| pattern.matches(value))
            }
        }
    }

    /// Whether the request's fields pass: a field sent more than once
    /// counts as its values joined with `, ` (RFC 9110 5.3).
    pub(crate) fn passes_header(&self, fields: &Fields<'_>) -> bool {
        let mut values = fields.get_all(&self.name);
        let Some(first) = values.next() else {
            return self.passes(None);
        };
        match values.next() {
            None => self.passes(Some(first)),
            Some(second) => {
                let mut joined = first.to_vec();
                for value in std::iter::once(second).chain(values) {
                    joined.extend_from_slice(b", ");
                    joined.extend_from_slice(value);
                }
                self.passes(Some(&joined))
            }
        }
    }

    /// Whether the query passes (the first parameter of the name counts).
    pub(crate) fn passes_query(&self, query: Option<&[u8]>) -> bool {
        let value = query.and_then(|q| first_param(q, &self.name));
        self.passes(value.as_deref().map(str::as_bytes))
    }
}

/// Method, header and query conditions of one route.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conditions {
    /// Empty: any.
    pub methods: Vec<Method>,
    pub headers: Vec<FieldMatch>,
    pub query: Vec<FieldMatch>,
}

/// How a request fares against one route's conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Match,
    /// Everything but the method matches.
    OtherMethod,
    NoMatch,
}

impl Conditions {
    /// `methods_count`: whether a method mismatch is worth telling apart
    /// (for a 405); when not, the cheap test goes first.
    #[inline]
    pub(crate) fn check(&self, facts: &Facts<'_>, methods_count: bool) -> Verdict {
        let method_ok = self.methods.is_empty() || self.methods.contains(facts.method);
        if !method_ok && !methods_count {
            return Verdict::NoMatch;
        }
        if !self.headers.iter().all(|h| h.passes_header(&facts.fields))
            || !self.query.iter().all(|q| q.passes_query(facts.query))
        {
            return Verdict::NoMatch;
        }
        match method_ok {
            true => Verdict::Match,
            false => Verdict::OtherMethod,
        }
    }
}

/// The value of the first parameter called `name` in a query
/// (`a=1&b=2`), `%XX` escapes decoded (`+` is kept: RFC 3986 does not
/// make it a space); a parameter without `=` has the empty value. `None`
/// when there is none, or when its name or value does not decode to
/// UTF-8.
pub(crate) fn first_param<'q>(query: &'q [u8], name: &str) -> Option<Cow<'q, str>> {
    for pair in query.split(|&b| b == b'&') {
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        if decoded(key).is_some_and(|key| key == name) {
            return decoded(value);
        }
    }
    None
}

/// `text` with `%XX` decoded; a `%` without two hex digits stays as it is.
fn decoded(text: &[u8]) -> Option<Cow<'_, str>> {
    if !text.contains(&b'%') {
        return std::str::from_utf8(text).ok().map(Cow::Borrowed);
    }
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match (text[i], text.get(i + 1).copied(), text.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                let byte = hex(h).unwrap_or_default() * 16 + hex(l).unwrap_or_default();
                out.push(u8::try_from(byte).unwrap_or_default());
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(yaml: &str) -> FieldMatchSettings {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn query_parameters_are_read_first_come_and_decoded() {
        let q = b"animal=whale&ANIMAL=Whale&color=blue&animal=shark&x&e=%41%zz%C3%A9";
        assert_eq!(first_param(q, "animal").as_deref(), Some("whale"));
        assert_eq!(first_param(q, "ANIMAL").as_deref(), Some("Whale"));
        assert_eq!(first_param(q, "x").as_deref(), Some(""));
        assert_eq!(first_param(q, "e").as_deref(), Some("A%zzé"));
        assert_eq!(first_param(q, "missing"), None);
        assert_eq!(first_param(b"%61nimal=1", "animal").as_deref(), Some("1"));
        assert_eq!(first_param(b"a=%FF", "a"), None, "not UTF-8");
        assert_eq!(first_param(b"a=1+2", "a").as_deref(), Some("1+2"));
        assert_eq!(first_param(b"", "a"), None);
    }

    #[test]
    fn header_conditions_read_every_field_of_the_name() {
        let map = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = http::HeaderMap::new();
            for (n, v) in pairs {
                headers.append(*n, http::HeaderValue::from_static(v));
            }
            headers
        };
        let exact = FieldMatch::header(&field("{ name: Version, value: two }"));
        let regex = FieldMatch::header(&field("{ name: version, regex: 't[a-z]+' }"));
        let present = FieldMatch::header(&field("{ name: x-debug, present: true }"));
        let absent = FieldMatch::header(&field("{ name: x-debug, present: false }"));
        let one = map(&[("version", "two")]);
        let fields = Fields::Map(&one);
        assert!(exact.passes_header(&fields) && regex.passes_header(&fields));
        assert!(!present.passes_header(&fields) && absent.passes_header(&fields));
        let two = map(&[("version", "two"), ("version", "three"), ("x-debug", "")]);
        let fields = Fields::Map(&two);
        assert!(!exact.passes_header(&fields), "`two, three` is not `two`");
        assert!(!regex.passes_header(&fields), "the whole value must match");
        assert!(present.passes_header(&fields) && !absent.passes_header(&fields));
        let joined = FieldMatch::header(&field("{ name: version, value: 'two, three' }"));
        assert!(joined.passes_header(&fields));
    }

    #[test]
    fn a_method_mismatch_is_told_apart_only_when_asked() {
        let get = Method::GET;
        let headers = http::HeaderMap::new();
        let facts = Facts {
            host: None,
            method: &get,
            path: "/",
            query: Some(b"v=1"),
            fields: Fields::Map(&headers),
        };
        let post_only = Conditions {
            methods: vec![Method::POST],
            ..Conditions::default()
        };
        assert_eq!(post_only.check(&facts, true), Verdict::OtherMethod);
        assert_eq!(post_only.check(&facts, false), Verdict::NoMatch);
        let query = Conditions {
            methods: vec![Method::POST],
            query: vec![FieldMatch::query(&field("{ name: v, value: '2' }"))],
            ..Conditions::default()
        };
        assert_eq!(query.check(&facts, true), Verdict::NoMatch);
        assert_eq!(Conditions::default().check(&facts, true), Verdict::Match);
    }
}
