//! The `paths` section: how request targets are normalised before routing
//! (docs/CONFIG.md, "Request normalisation"; the work is `wire::normalize`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Path normalisation settings, the same for every listener and route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PathSettings {
    /// `//` counts as `/` (for routing, and in the path sent upstream).
    pub merge_slashes: bool,
    /// What the upstream receives: the normalised target, or the client's.
    pub forward: Forward,
    /// `%2F` and `%5C` in a path.
    pub escaped_slash: EscapedSlash,
    /// Path parameters (`/a;v=1/b`).
    pub semicolon: Semicolon,
    /// Whether routes match paths whatever their letter case.
    pub case: Case,
    /// `%25` followed by two hex digits (`/%2561dmin`).
    pub double_encoding: DoubleEncoding,
    /// Request fields that make some frameworks route to another path or
    /// method (`X-Original-URL`, `X-HTTP-Method-Override`, ...).
    pub override_headers: OverrideHeaders,
}

impl Default for PathSettings {
    fn default() -> Self {
        Self {
            merge_slashes: true,
            forward: Forward::Normalized,
            escaped_slash: EscapedSlash::Reject,
            semicolon: Semicolon::StripForMatching,
            case: Case::Insensitive,
            double_encoding: DoubleEncoding::Keep,
            override_headers: OverrideHeaders::Strip,
        }
    }
}

/// Which spelling of the target and Host the upstream receives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Forward {
    /// What routing saw, so proxy and upstream agree on what was asked.
    #[default]
    Normalized,
    /// As the client wrote it (routing still uses the normal form).
    Original,
}

/// What to do with an encoded slash or backslash in a path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EscapedSlash {
    /// 400: whether it separates segments depends on the backend.
    #[default]
    Reject,
    /// Decoded to `/`, so it separates segments (before dot segments go).
    Decode,
    /// Left encoded (upper-case hex): part of a segment's name.
    Keep,
}

/// What to do with `;` path parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Semicolon {
    /// An ordinary character, for routing and upstream alike.
    Keep,
    /// Routing ignores each segment's `;…` (as servlet containers do);
    /// the upstream receives them.
    #[default]
    StripForMatching,
    /// 400 for any `;` in the path.
    Reject,
}

/// How route paths compare with request paths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// `/ADMIN` matches a route for `/admin` (the upstream still receives
    /// `/ADMIN`): a guard holds whether the backend's routing ignores case
    /// (Express, ASP.NET Core) or not.
    #[default]
    Insensitive,
    /// Letter case counts, as in Envoy's, nginx's and HAProxy's defaults.
    Sensitive,
}

/// What to do with an encoded `%` that, decoded once more, would be an
/// escape itself (`%2561` is `%61`, which is `a`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoubleEncoding {
    /// Kept as `%25` (RFC 3986: it is the character `%`, not an escape);
    /// only a backend that decodes twice reads it otherwise.
    #[default]
    Keep,
    /// 400, for backends that decode twice.
    Reject,
}

/// What to do with the request fields that make lenient frameworks serve
/// another path or method than the one routed (`X-Original-URL`,
/// `X-Rewrite-URL`, `X-HTTP-Method-Override`, `X-HTTP-Method`,
/// `X-Method-Override`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverrideHeaders {
    /// Removed from every request before it goes upstream.
    #[default]
    Strip,
    /// Forwarded (a backend that needs them, behind routes without guards).
    Keep,
}
