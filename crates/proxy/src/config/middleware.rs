//! The `middleware:` and `chains:` sections: handler instances with their
//! settings, and the named lists that routes refer to.
//!
//! An instance named after its handler type holds that type's settings
//! directly (`jwt: { jwks: keys.json }`); any other name says its type as
//! the single key (`admin_auth: { jwt: { jwks: keys.json, scopes: [admin] } }`),
//! so one type can have several configurations, e.g. per route.

use std::{collections::BTreeMap, fmt};

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{
    de::{self, MapAccess, Visitor},
    ser::SerializeMap,
    Deserialize, Deserializer, Serialize, Serializer,
};
use serde_saphyr::Spanned;

use super::{auth::*, compress::*, grpc_web::GrpcWebSettings, handlers::*};

/// The handler types, one line each: the name that chains and
/// `middleware:` use, its module in the middleware layer
/// (middleware/NAME.rs or middleware/NAME/mod.rs, declared from this
/// line), its settings (config/handlers.rs), and `defaults` when a chain
/// may name the type without a `middleware:` entry.
///
/// To add a handler (docs/MIDDLEWARE.md, "Adding a handler"): its
/// settings struct in config/handlers.rs, its file middleware/NAME.rs
/// (the handler, `impl Build` for its settings, its metrics, figures and
/// per-request state through the `Handler` hooks, its unit tests), one
/// line here, and its section in docs/MIDDLEWARE.md. The
/// [`HandlerSettings`] enum, [`HANDLER_TYPES`], the parsing of
/// `middleware:`, the middleware layer's `mod` lines and its build
/// dispatch are all made from this list; this layer never uses the module
/// name.
macro_rules! for_each_handler {
    ($then:ident) => {
        $then! {
            "correlation" (mod correlation) => CorrelationSettings, defaults;
            "metrics" (mod metrics) => MetricsSettings, defaults;
            "access_log" (mod access_log) => AccessLogSettings, defaults;
            "headers" (mod headers) => HeadersSettings;
            "jwt" (mod jwt) => JwtSettings;
            "validate" (mod validate) => ValidateSettings;
            "rate_limit" (mod rate_limit) => RateLimitSettings;
            "concurrency_limit" (mod concurrency_limit) => ConcurrencyLimitSettings;
            "cors" (mod cors) => CorsSettings, defaults;
            "ip_filter" (mod ip_filter) => IpFilterSettings;
            "body_limit" (mod body_limit) => BodyLimitSettings;
            "fault" (mod fault) => FaultSettings;
            "api_key" (mod api_key) => ApiKeySettings;
            "basic_auth" (mod basic_auth) => BasicAuthSettings;
            "ext_authz" (mod ext_authz) => ExtAuthzSettings;
            "oidc" (mod oidc) => OidcSettings;
            "compress" (mod compress) => CompressSettings, defaults;
            "grpc_web" (mod grpc_web) => GrpcWebSettings, defaults;
            "redirect_https" (mod redirect_https) => RedirectHttpsSettings, defaults;
        }
    };
}
pub(crate) use for_each_handler;

/// The [`HandlerSettings`] enum and what goes with it, from [`for_each_handler`].
macro_rules! handler_settings {
    (@defaults $settings:ident defaults) => {
        Some(Self::$settings($settings::default()))
    };
    (@defaults $settings:ident) => {
        None
    };
    ($($name:literal (mod $module:ident) => $settings:ident $(, $defaults:ident)?;)*) => {
        /// One handler's type and settings.
        #[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
        pub enum HandlerSettings {
            $(#[serde(rename = $name)] $settings($settings),)*
        }

        /// The handler type names, as written in chains and `middleware:`.
        pub const HANDLER_TYPES: &[&str] = &[$($name),*];

        impl HandlerSettings {
            /// The settings a chain gets when it names a type without a
            /// `middleware:` entry; `None` when the type has required settings.
            pub fn defaults(kind: &str) -> Option<Self> {
                match kind {
                    $($name => handler_settings!(@defaults $settings $($defaults)?),)*
                    _ => None,
                }
            }

            /// Its type's name, as written in chains and `middleware:`.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$settings(_) => $name,)*
                }
            }

            /// Each type's name and the schema of its settings.
            pub(super) fn settings_schemas(
                generator: &mut SchemaGenerator,
            ) -> Vec<(&'static str, Schema)> {
                vec![$(($name, generator.subschema_for::<$settings>()),)*]
            }

            /// Serialises the settings alone, without the type.
            fn serialize_settings<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Self::$settings(settings) => settings.serialize(serializer),)*
                }
            }

            /// The settings of the handler type `kind`, read as the next
            /// value of `map`; `None` when `kind` is no handler type.
            fn next_settings<'de, A: MapAccess<'de>>(
                kind: &str,
                map: &mut A,
            ) -> Result<Option<Self>, A::Error> {
                Ok(Some(match kind {
                    $($name => Self::$settings(map.next_value()?),)*
                    _ => return Ok(None),
                }))
            }
        }
    };
}
for_each_handler!(handler_settings);

/// Handler instances by name.
#[derive(Debug, Default, Clone)]
pub struct MiddlewareSettings(pub BTreeMap<String, HandlerSettings>);

/// As it is written: an instance named after its type as its settings,
/// any other as `{ TYPE: settings }`.
impl Serialize for MiddlewareSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct SettingsOnly<'a>(&'a HandlerSettings);
        impl Serialize for SettingsOnly<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                self.0.serialize_settings(serializer)
            }
        }
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, handler) in &self.0 {
            if handler.kind() == name {
                map.serialize_entry(name, &SettingsOnly(handler))?;
            } else {
                map.serialize_entry(name, handler)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MiddlewareSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MiddlewareVisitor)
    }
}

struct MiddlewareVisitor;

impl<'de> Visitor<'de> for MiddlewareVisitor {
    type Value = MiddlewareSettings;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of handler names to settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MiddlewareSettings, A::Error> {
        let mut handlers = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            // Named after its type: the settings; else `{ TYPE: settings }`.
            let handler = match HandlerSettings::next_settings(&name, &mut map)? {
                Some(handler) => handler,
                None => map.next_value()?,
            };
            if handlers.insert(name.clone(), handler).is_some() {
                return Err(de::Error::custom(format!("`{name}` is defined twice")));
            }
        }
        Ok(MiddlewareSettings(handlers))
    }
}

/// A route's chain: the name of one in `chains:`, or a list of handler names.
#[derive(Debug, Clone)]
pub enum ChainRef {
    Named(String),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for ChainRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChainVisitor;
        impl<'de> Visitor<'de> for ChainVisitor {
            type Value = ChainRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a chain name or a list of handler names")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<ChainRef, E> {
                Ok(ChainRef::Named(name.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ChainRef, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(ChainRef::List(names))
            }
        }
        deserializer.deserialize_any(ChainVisitor)
    }
}

/// Named chains: lists of handler instance (or type) names.
pub type Chains = BTreeMap<String, Vec<Spanned<String>>>;

impl Serialize for ChainRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Named(name) => name.serialize(serializer),
            Self::List(names) => names.serialize(serializer),
        }
    }
}
