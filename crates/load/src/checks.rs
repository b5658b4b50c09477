//! Checks on answers (k6's `check`): a status set, a header, a body
//! substring, a JSON pointer's value, a longest time. Each answer is
//! checked by every check of its scenario and each check counts its passes
//! and failures; a failed check is not a transport error (the answer is
//! counted as one, with its status).
//!
//! What a check needs of an answer is captured while it is read, and only
//! then: the headers the checks name, and the body up to `body_limit`
//! bytes when a check reads it. Without checks the reader captures
//! nothing, so a run without checks costs what it did before.

use std::{sync::Arc, time::Duration};

use http::HeaderName;
use serde::Deserialize;

/// Most checks a scenario may have: each answer's verdicts are one bit each of a `u64`.
pub const MAX_CHECKS: usize = 64;
/// Default body bytes kept per answer for the checks that read it.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;
/// Largest `check_body_limit`.
pub const MAX_BODY_LIMIT: usize = 16 << 20;
/// Characters a check name may not hold: thresholds name checks
/// (`checks.NAME > 99%`) and end the name at the comparison.
const RESERVED: [char; 4] = ['<', '>', '=', '!'];

/// One check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub rule: Rule,
}

/// What a check asks of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// The status is one of these.
    Status(StatusSet),
    /// A response header (HTTP/2 and HTTP/3: a field) is present, equals or contains a text.
    Header { name: HeaderName, test: TextTest },
    /// The body holds these bytes.
    BodyContains(Vec<u8>),
    /// The body is JSON and the value at this pointer (RFC 6901) exists,
    /// or equals `equals` (numbers compare as numbers).
    JsonPointer {
        pointer: String,
        equals: Option<serde_json::Value>,
    },
    /// The answer was complete (last byte in) within this long of its send.
    MaxTime(Duration),
}

/// A header check's test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextTest {
    Present,
    Equals(String),
    Contains(String),
}

/// A set of status codes (0 to 639).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusSet([u64; 10]);

impl StatusSet {
    pub fn insert(&mut self, code: u16) {
        if let Some(word) = self.0.get_mut(usize::from(code / 64)) {
            *word |= 1 << (code % 64);
        }
    }

    pub fn contains(&self, code: u16) -> bool {
        self.0
            .get(usize::from(code / 64))
            .is_some_and(|word| word & (1 << (code % 64)) != 0)
    }
}

/// A check as written in a scenario file: a name and exactly one rule.
/// Unknown keys are refused, so a misspelt rule cannot make a check that
/// never fails.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    pub name: Option<String>,
    /// `200`, `[200, 201]`, `2xx`, or `[2xx, 304]`.
    pub status: Option<serde_json::Value>,
    pub header: Option<String>,
    /// With `header`: the value is this text; with `json_pointer`: this value.
    pub equals: Option<serde_json::Value>,
    /// With `header`: the value holds this text.
    pub contains: Option<String>,
    pub body_contains: Option<String>,
    pub json_pointer: Option<String>,
    /// `50ms`, `1s`: from the send to the answer's last byte.
    pub max_time: Option<String>,
}

impl CheckSpec {
    /// The check this spec describes, or what is wrong with it.
    pub fn into_check(self) -> Result<Check, String> {
        let rules = [
            self.status.is_some(),
            self.header.is_some(),
            self.body_contains.is_some(),
            self.json_pointer.is_some(),
            self.max_time.is_some(),
        ];
        match rules.iter().filter(|&&on| on).count() {
            0 => {
                return Err("a check needs one rule: status, header, body_contains, json_pointer or max_time".into())
            }
            1 => {}
            _ => {
                return Err("a check has one rule: split status, header, body_contains, json_pointer and max_time into checks of their own".into())
            }
        }
        if self.contains.is_some() && self.header.is_none() {
            return Err("`contains` goes with `header` (for the body: body_contains)".into());
        }
        if self.equals.is_some() && self.header.is_none() && self.json_pointer.is_none() {
            return Err("`equals` goes with `header` or `json_pointer`".into());
        }
        let rule = if let Some(status) = &self.status {
            Rule::Status(parse_statuses(status)?)
        } else if let Some(name) = &self.header {
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("header: `{name}` is not a header name"))?;
            let test = match (&self.equals, &self.contains) {
                (Some(_), Some(_)) => {
                    return Err("header: give `equals` or `contains`, not both".into())
                }
                (Some(serde_json::Value::String(text)), None) => TextTest::Equals(text.clone()),
                (Some(other), None) => TextTest::Equals(other.to_string()),
                (None, Some(text)) if text.is_empty() => {
                    return Err("header: `contains` an empty text is always true".into())
                }
                (None, Some(text)) => TextTest::Contains(text.clone()),
                (None, None) => TextTest::Present,
            };
            Rule::Header { name, test }
        } else if let Some(text) = &self.body_contains {
            if text.is_empty() {
                return Err("body_contains: an empty text is in every body".into());
            }
            Rule::BodyContains(text.as_bytes().to_vec())
        } else if let Some(pointer) = &self.json_pointer {
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(format!(
                    "json_pointer: `{pointer}` is not a JSON pointer (RFC 6901: empty or starting with /, like /0/name)"
                ));
            }
            Rule::JsonPointer {
                pointer: pointer.clone(),
                equals: self.equals.clone(),
            }
        } else {
            let text = self.max_time.as_deref().unwrap_or_default();
            let limit = humantime::parse_duration(text.trim()).map_err(|err| {
                format!("max_time: `{text}` is not a duration ({err}; like 50ms)")
            })?;
            if limit.is_zero() {
                return Err("max_time: 0 fails every answer".into());
            }
            Rule::MaxTime(limit)
        };
        let name = match self.name {
            Some(name) => check_name(name)?,
            None => rule.describe(),
        };
        Ok(Check { name, rule })
    }
}

/// A name thresholds can refer to.
fn check_name(name: String) -> Result<String, String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.len() > 100 {
        return Err("name: 1 to 100 characters".into());
    }
    if let Some(bad) = trimmed
        .chars()
        .find(|c| RESERVED.contains(c) || c.is_control())
    {
        return Err(format!(
            "name: `{}` may not hold {bad:?} (thresholds name checks: checks.NAME > 99%)",
            trimmed.escape_debug()
        ));
    }
    Ok(trimmed.to_string())
}

/// `200`, `[200, 201]`, `2xx`, `[2xx, 304]`.
fn parse_statuses(value: &serde_json::Value) -> Result<StatusSet, String> {
    let mut set = StatusSet::default();
    let items: Vec<&serde_json::Value> = match value {
        serde_json::Value::Array(items) if items.is_empty() => {
            return Err("status: an empty list fails every answer".into())
        }
        serde_json::Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for item in items {
        let text = match item {
            serde_json::Value::String(text) => text.trim().to_string(),
            other => other.to_string(),
        };
        let bad = || format!("status: `{text}` is not a status (100 to 599) or a class like 2xx");
        if let Some(class) = text.strip_suffix("xx").or_else(|| text.strip_suffix("XX")) {
            let class: u16 = class.parse().map_err(|_| bad())?;
            if !(1..=5).contains(&class) {
                return Err(bad());
            }
            (class * 100..class * 100 + 100).for_each(|code| set.insert(code));
        } else {
            let code: u16 = text.parse().map_err(|_| bad())?;
            if !(100..=599).contains(&code) {
                return Err(bad());
            }
            set.insert(code);
        }
    }
    Ok(set)
}

impl Rule {
    /// The default name of a check with this rule.
    fn describe(&self) -> String {
        let name = match self {
            Rule::Status(set) => {
                let codes: Vec<u16> = (100..600u16).filter(|&c| set.contains(c)).collect();
                // Whole classes as 2xx.
                let mut shown = Vec::new();
                let mut i = 0;
                while let Some(&code) = codes.get(i) {
                    let full = code % 100 == 0 && (code..code + 100).all(|c| set.contains(c));
                    if full {
                        shown.push(format!("{}xx", code / 100));
                        i += 100;
                    } else {
                        shown.push(code.to_string());
                        i += 1;
                    }
                }
                format!("status {}", shown.join(" or "))
            }
            Rule::Header { name, test } => match test {
                TextTest::Present => format!("header {name} present"),
                TextTest::Equals(text) => format!("header {name} is {text}"),
                TextTest::Contains(text) => format!("header {name} contains {text}"),
            },
            Rule::BodyContains(text) => {
                format!("body contains {}", String::from_utf8_lossy(text))
            }
            Rule::JsonPointer { pointer, equals } => match equals {
                Some(value) => format!("json {pointer} is {value}"),
                None => format!("json {pointer} present"),
            },
            Rule::MaxTime(limit) => format!("time within {}", humantime::format_duration(*limit)),
        };
        // The reserved characters may come from the values themselves.
        let name: String = name
            .chars()
            .map(|c| {
                if RESERVED.contains(&c) || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .take(100)
            .collect();
        name
    }
}

/// The checks of a run, as the connections use them.
#[derive(Debug)]
pub(crate) struct CheckSet {
    checks: Vec<Rule>,
    /// The headers any check reads, each once.
    wanted: Arc<[HeaderName]>,
    /// For each check, its header's place in `wanted`.
    slots: Vec<usize>,
    /// Whether a check reads the body, and how much of it is kept.
    body_limit: Option<usize>,
}

impl CheckSet {
    /// `None` without checks.
    pub(crate) fn new(checks: &[Check], body_limit: usize) -> Option<Self> {
        if checks.is_empty() {
            return None;
        }
        let mut wanted: Vec<HeaderName> = Vec::new();
        let mut slots = Vec::with_capacity(checks.len());
        let mut reads_body = false;
        for check in checks {
            match &check.rule {
                Rule::Header { name, .. } => {
                    let slot = wanted.iter().position(|w| w == name).unwrap_or_else(|| {
                        wanted.push(name.clone());
                        wanted.len() - 1
                    });
                    slots.push(slot);
                    continue;
                }
                Rule::BodyContains(_) | Rule::JsonPointer { .. } => reads_body = true,
                Rule::Status(_) | Rule::MaxTime(_) => {}
            }
            slots.push(usize::MAX);
        }
        Some(Self {
            checks: checks.iter().map(|c| c.rule.clone()).collect(),
            wanted: wanted.into(),
            slots,
            body_limit: reads_body.then_some(body_limit),
        })
    }

    /// An empty capture for one answer, or `None` when no check reads
    /// headers or the body.
    pub(crate) fn capture(&self) -> Option<Captured> {
        (!self.wanted.is_empty() || self.body_limit.is_some()).then(|| Captured {
            wanted: Arc::clone(&self.wanted),
            headers: vec![None; self.wanted.len()],
            body: Vec::new(),
            limit: self.body_limit.unwrap_or(0),
            truncated: false,
        })
    }

    /// Which checks an answer with `status`, `captured` and complete
    /// `took` after its send passed: bit `i` for check `i`.
    pub(crate) fn verdicts(&self, status: u16, captured: Option<&Captured>, took: Duration) -> u64 {
        let mut json: Option<Option<serde_json::Value>> = None;
        let mut passed = 0u64;
        for (i, rule) in self.checks.iter().enumerate() {
            let ok = match rule {
                Rule::Status(set) => set.contains(status),
                Rule::MaxTime(limit) => took <= *limit,
                Rule::Header { test, .. } => {
                    let value = captured.and_then(|c| c.headers.get(self.slots[i])?.as_deref());
                    match (test, value) {
                        (_, None) => false,
                        (TextTest::Present, Some(_)) => true,
                        (TextTest::Equals(text), Some(value)) => value == text.as_bytes(),
                        (TextTest::Contains(text), Some(value)) => contains(value, text.as_bytes()),
                    }
                }
                Rule::BodyContains(text) => captured.is_some_and(|c| contains(&c.body, text)),
                Rule::JsonPointer { pointer, equals } => {
                    // Parsed once per answer, for all its JSON checks; a
                    // body cut at the limit does not parse, and fails.
                    let parsed = json.get_or_insert_with(|| {
                        captured
                            .filter(|c| !c.truncated)
                            .and_then(|c| serde_json::from_slice(&c.body).ok())
                    });
                    match (parsed.as_ref().and_then(|v| v.pointer(pointer)), equals) {
                        (None, _) => false,
                        (Some(_), None) => true,
                        (Some(found), Some(expected)) => json_equal(found, expected),
                    }
                }
            };
            if ok {
                passed |= 1 << i;
            }
        }
        passed
    }
}

/// What the checks read of one answer.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    wanted: Arc<[HeaderName]>,
    /// The value of each wanted header (the first, if repeated).
    headers: Vec<Option<Vec<u8>>>,
    body: Vec<u8>,
    limit: usize,
    /// The body was longer than the limit.
    truncated: bool,
}

impl Captured {
    /// Forgets the last answer (its buffers are kept for the next).
    pub(crate) fn clear(&mut self) {
        self.headers.iter_mut().for_each(|h| *h = None);
        self.body.clear();
        self.truncated = false;
    }

    /// A header of the answer; kept if a check reads it.
    pub(crate) fn header(&mut self, name: &[u8], value: &[u8]) {
        let slot = self
            .wanted
            .iter()
            .position(|w| w.as_str().as_bytes().eq_ignore_ascii_case(name));
        if let Some(slot) = slot.and_then(|s| self.headers.get_mut(s)) {
            if slot.is_none() {
                *slot = Some(value.to_vec());
            }
        }
    }

    /// A part of the body; kept up to the limit.
    pub(crate) fn body(&mut self, part: &[u8]) {
        let room = self.limit.saturating_sub(self.body.len());
        if part.len() > room {
            self.truncated = self.limit > 0;
        }
        self.body.extend_from_slice(&part[..part.len().min(room)]);
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// JSON equality where `1` equals `1.0`.
fn json_equal(found: &serde_json::Value, expected: &serde_json::Value) -> bool {
    match (found.as_f64(), expected.as_f64()) {
        (Some(a), Some(b)) if found.is_number() && expected.is_number() => a == b,
        _ => found == expected,
    }
}

#[cfg(test)]
mod tests;
