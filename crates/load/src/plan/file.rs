//! The scenario file's schema (docs/LOAD.md, "Scenario files"), as serde
//! reads it: unknown keys are refused, and the values later checks point
//! at keep their place in the file.

use std::{collections::BTreeMap, fmt, marker::PhantomData, time::Duration};

use serde::{
    de::{self, MapAccess, Visitor},
    Deserialize, Deserializer,
};
use serde_saphyr::{Location, Spanned};

use crate::checks::CheckSpec;

/// What is wrong in a scenario file: where, the key, and what.
pub(super) type Problem = (Location, String, String);

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanFile {
    /// Run the scenarios one after another, in the file's order (default:
    /// all together).
    #[serde(default)]
    pub(crate) sequential: bool,
    /// Thresholds on all scenarios together.
    #[serde(default)]
    pub(crate) thresholds: Vec<Spanned<ThresholdFile>>,
    pub(crate) scenarios: Vec<Spanned<ScenarioFile>>,
}

/// One scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioFile {
    pub(crate) name: Spanned<String>,
    /// `closed` (wrk, default), `open` (a rate) or `users` (closed, with
    /// think times); stages need it said.
    pub(crate) model: Option<Spanned<Model>>,
    #[serde(default)]
    pub(crate) protocol: Protocol,
    /// The target: requests' URLs may be paths on it.
    pub(crate) url: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) requests: Vec<Spanned<StringOr<RequestFile>>>,
    /// Headers of every request.
    pub(crate) headers: Option<Spanned<BTreeMap<String, String>>>,
    pub(crate) body: Option<String>,
    pub(crate) body_file: Option<Spanned<String>>,
    pub(crate) connections: Option<usize>,
    pub(crate) users: Option<usize>,
    pub(crate) threads: Option<usize>,
    pub(crate) duration: Option<Spanned<DurationText>>,
    /// Stop after this many requests instead of after `duration`.
    pub(crate) total_requests: Option<u64>,
    pub(crate) rate: Option<Spanned<f64>>,
    pub(crate) stages: Option<Spanned<Vec<StageFile>>>,
    pub(crate) start_rate: Option<Spanned<f64>>,
    pub(crate) start_users: Option<Spanned<f64>>,
    pub(crate) think: Option<Spanned<String>>,
    pub(crate) ramp: Option<DurationText>,
    pub(crate) pipeline: Option<usize>,
    pub(crate) streams: Option<usize>,
    pub(crate) timeout: Option<DurationText>,
    pub(crate) warmup: Option<DurationText>,
    #[serde(default)]
    pub(crate) insecure: bool,
    pub(crate) cacert: Option<String>,
    /// Parallel runs: start this long after the others.
    pub(crate) start_time: Option<Spanned<DurationText>>,
    #[serde(default)]
    pub(crate) checks: Vec<Spanned<CheckSpec>>,
    pub(crate) check_body_limit: Option<usize>,
    #[serde(default)]
    pub(crate) thresholds: Vec<Spanned<ThresholdFile>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Model {
    Closed,
    Open,
    Users,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Protocol {
    #[default]
    Http1,
    H2,
    H3,
}

/// A request of the mix: `GET /path` (or a URL), or in full.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestFile {
    pub(crate) method: Option<String>,
    pub(crate) url: String,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Option<String>,
    pub(crate) body_file: Option<String>,
    pub(crate) weight: Option<u32>,
}

/// One stage: `{ duration: 30s, target: 1000 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StageFile {
    pub(crate) duration: DurationText,
    pub(crate) target: f64,
}

/// A threshold: `p99 < 5ms`, or in full with `abort_on_fail` and `grace`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThresholdFull {
    pub(crate) threshold: String,
    #[serde(default)]
    pub(crate) abort_on_fail: bool,
    pub(crate) grace: Option<DurationText>,
}

pub(crate) type ThresholdFile = StringOr<ThresholdFull>;

/// A value written as a string or as a map.
#[derive(Debug)]
pub(crate) enum StringOr<T> {
    Text(String),
    Full(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for StringOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Either<T> {
            type Value = StringOr<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a map")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(StringOr::Text(text.to_string()))
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Self::Value, M::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(StringOr::Full)
            }
        }
        deserializer.deserialize_any(Either(PhantomData))
    }
}

/// A duration: `10s`, `500ms`, `1m30s`, or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DurationText(pub(crate) Duration);

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = DurationText;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration like 10s, 500ms or 1m30s (a bare number is seconds)")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<DurationText, E> {
                humantime::parse_duration(text.trim())
                    .map(DurationText)
                    .map_err(|err| {
                        E::custom(format!(
                            "`{text}` is not a duration ({err}; like 10s or 500ms)"
                        ))
                    })
            }

            fn visit_u64<E: de::Error>(self, seconds: u64) -> Result<DurationText, E> {
                Ok(DurationText(Duration::from_secs(seconds)))
            }

            fn visit_i64<E: de::Error>(self, seconds: i64) -> Result<DurationText, E> {
                u64::try_from(seconds)
                    .map(|s| DurationText(Duration::from_secs(s)))
                    .map_err(|_| E::custom(format!("{seconds} is not a duration: it is negative")))
            }

            fn visit_f64<E: de::Error>(self, seconds: f64) -> Result<DurationText, E> {
                Duration::try_from_secs_f64(seconds)
                    .map(DurationText)
                    .map_err(|_| E::custom(format!("{seconds} is not a duration in seconds")))
            }
        }
        deserializer.deserialize_any(Text)
    }
}
