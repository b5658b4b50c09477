//! A scenario's requests from its file: `METHOD URL` lines or full
//! requests (headers, a body or a body file, a weight), paths put on the
//! scenario's `url`, all on one target.

use std::{collections::BTreeMap, path::Path};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use serde_saphyr::Location;

use super::file::{Problem, RequestFile, ScenarioFile, StringOr};
use crate::{config::MAX_BODIES, parse_url, LoadConfig};

/// A request's own headers, body and weight.
type Extras = (Vec<(HeaderName, HeaderValue)>, Option<Bytes>, u32);

/// The scenario's requests, on one target.
pub(super) fn requests(
    file: &ScenarioFile,
    key: &str,
    base: &Path,
    at: Location,
) -> Result<LoadConfig, Problem> {
    let root = match &file.url {
        Some(url) => Some((
            parse_url(&url.value).map_err(|why| (url.referenced, format!("{key}.url"), why))?,
            url.referenced,
        )),
        None => None,
    };
    let absolute = |url: &str, location: Location, field: String| -> Result<String, Problem> {
        if url.starts_with('/') {
            let Some(((target, _), _)) = &root else {
                return Err((
                    location,
                    field,
                    format!("`{url}` is a path: give the scenario a `url` to put it on"),
                ));
            };
            return Ok(format!("{target}{url}"));
        }
        Ok(url.to_string())
    };
    let mut urls = Vec::new();
    let mut extras: Vec<Extras> = Vec::new();
    for (j, request) in file.requests.iter().enumerate() {
        let field = format!("{key}.requests[{j}]");
        let location = request.referenced;
        let problem = |why: String| (location, field.clone(), why);
        match &request.value {
            StringOr::Text(text) => {
                let mut words = text.split_whitespace();
                let (method, url) = match (words.next(), words.next(), words.next()) {
                    (Some(url), None, _) => ("GET", url),
                    (Some(method), Some(url), None) => (method, url),
                    _ => {
                        return Err(problem(format!(
                            "`{text}`: expected `[METHOD ]URL`, like `GET /v1/pets`"
                        )))
                    }
                };
                let method = Method::from_bytes(method.as_bytes())
                    .map_err(|_| problem(format!("`{method}` is not a method")))?;
                urls.push((method, absolute(url, location, field.clone())?));
                extras.push((Vec::new(), None, 1));
            }
            StringOr::Full(RequestFile {
                method,
                url,
                headers,
                body,
                body_file,
                weight,
            }) => {
                let method = method.as_deref().unwrap_or("GET");
                let method = Method::from_bytes(method.as_bytes())
                    .map_err(|_| problem(format!("`{method}` is not a method")))?;
                urls.push((method, absolute(url, location, field.clone())?));
                let headers = header_list(headers).map_err(problem)?;
                let body = match (body, body_file) {
                    (Some(_), Some(_)) => {
                        return Err(problem("give `body` or `body_file`, not both".into()))
                    }
                    (Some(body), None) => Some(Bytes::from(body.clone())),
                    (None, Some(path)) => Some(read_body(base, path).map_err(problem)?),
                    (None, None) => None,
                };
                extras.push((headers, body, weight.unwrap_or(1)));
            }
        }
    }
    if urls.is_empty() {
        match &file.url {
            Some(url) => {
                urls.push((Method::GET, url.value.clone()));
                extras.push((Vec::new(), None, 1));
            }
            None => {
                return Err((
                    at,
                    format!("{key}.requests"),
                    "give `url`, or `requests`".into(),
                ))
            }
        }
    }
    let mut config =
        LoadConfig::new(&urls).map_err(|err| (at, format!("{key}.requests"), err.0))?;
    if let Some(((target, _), location)) = &root {
        if *target != config.target {
            return Err((
                *location,
                format!("{key}.url"),
                format!("the requests go to {}, not to {target}", config.target),
            ));
        }
    }
    for (spec, (headers, body, weight)) in config.requests.iter_mut().zip(extras) {
        spec.headers = headers;
        spec.body = body;
        spec.weight = weight;
    }
    Ok(config)
}

pub(super) fn header_list(
    headers: &BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("`{name}` is not a header name"))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|_| format!("the value of `{name}` is not a header value"))?;
            Ok((name, value))
        })
        .collect()
}

/// A body file, found from the scenario file's folder, at most [`MAX_BODIES`].
pub(super) fn read_body(base: &Path, path: &str) -> Result<Bytes, String> {
    let path = base.join(path);
    let size = std::fs::metadata(&path)
        .map_err(|err| format!("{}: {err}", path.display()))?
        .len();
    if size > MAX_BODIES as u64 {
        return Err(format!(
            "{}: {size} bytes, more than the {MAX_BODIES} a scenario's bodies may hold",
            path.display()
        ));
    }
    std::fs::read(&path)
        .map(Bytes::from)
        .map_err(|err| format!("{}: {err}", path.display()))
}
