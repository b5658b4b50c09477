//! `jwt`: bearer tokens verified against a JWKS (docs/MIDDLEWARE.md).
//! 401 with `WWW-Authenticate` for a missing or bad token, 403 for a
//! missing scope; chosen claims are forwarded as request headers, and the
//! same headers sent by the client are always dropped so they cannot be
//! forged. Verified tokens are served from a bounded cache until they
//! expire; a token naming an unknown key waits for one (rate-limited)
//! JWKS refetch, so keys rotate without a restart.

use std::{sync::Arc, time::Duration};

use http::{header, HeaderName, HeaderValue, StatusCode};
use jwt::{AlgorithmSet, JwtError, JwtVerifier, Verified, VerifierSettings};

use super::{
    build::{Build, Builder},
    jwks::KeySource,
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::JwtSettings;

/// How long a request waits for an unknown-kid refetch.
const REFETCH_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(crate) struct JwtAuthenticator {
    verifier: Arc<JwtVerifier>,
    source: Arc<KeySource>,
    scopes: Vec<String>,
    forward: Vec<(String, HeaderName)>,
}

impl Build for JwtSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(JwtAuthenticator::new(self)?))
    }
}

impl JwtAuthenticator {
    fn new(config: &JwtSettings) -> anyhow::Result<Self> {
        let algorithms: AlgorithmSet = config.algorithms.iter().map(|a| a.0).collect();
        let mut settings = VerifierSettings::new(algorithms.iter());
        settings.issuer.clone_from(&config.issuer);
        settings.audiences.clone_from(&config.audience);
        settings.leeway = config.leeway;
        settings.max_token_bytes = usize::try_from(config.max_token_bytes).unwrap_or(usize::MAX);
        settings.cache_capacity = config.cache;
        let source = KeySource::start(
            config.jwks.as_ref().map(|f| f.value.as_str()),
            config.jwks_url.as_ref().map(|url| url.0.clone()),
            config.refresh,
        )?;
        let verifier = JwtVerifier::new(settings, Arc::clone(&source.store))
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        let forward = config
            .forward_claims
            .iter()
            .map(|(claim, header)| (claim.clone(), header.0.clone()))
            .collect();
        Ok(Self {
            verifier: Arc::new(verifier),
            source,
            scopes: config.scopes.clone(),
            forward,
        })
    }

    /// Scopes, then claims forwarded: what follows a verified token.
    fn admit(&self, verified: Arc<Verified>, exchange: &mut Exchange) -> Flow {
        if let Some(missing) = self
            .scopes
            .iter()
            .find(|needed| !verified.scopes().any(|s| s == needed.as_str()))
        {
            let challenge = format!(
                "Bearer realm=\"sluice\", error=\"insufficient_scope\", scope=\"{}\"",
                self.scopes.join(" ")
            );
            return Flow::Answer(
                Answer::problem(
                    StatusCode::FORBIDDEN,
                    format!("the token lacks the scope `{missing}`"),
                )
                .with_header(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_str(&challenge)
                        .unwrap_or(HeaderValue::from_static("Bearer realm=\"sluice\"")),
                ),
            );
        }
        for (claim, name) in &self.forward {
            match verified
                .claim_as_header_value(claim)
                .and_then(|v| HeaderValue::from_str(&v).ok())
            {
                Some(value) => exchange.request_headers.set(name.clone(), value),
                None => exchange.request_headers.remove.push(name.clone()),
            }
        }
        exchange.claims = Some(verified);
        Flow::Next
    }
}

/// The token of an `Authorization: Bearer` field.
fn bearer<'a>(request: &RequestView<'a>) -> Result<&'a str, &'static str> {
    let value = request.header("authorization").ok_or("")?;
    let value = std::str::from_utf8(value).map_err(|_| "the Authorization field is not text")?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or("the Authorization field is not `Bearer TOKEN`")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("the Authorization scheme must be Bearer");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("the bearer token is empty");
    }
    Ok(token)
}

fn unauthorized(error: Option<(&str, &str)>) -> Flow {
    let (detail, challenge) = match error {
        None => (
            "a bearer token is required".to_string(),
            "Bearer realm=\"sluice\"".to_string(),
        ),
        Some((code, description)) => (
            format!("invalid token: {description}"),
            format!(
                "Bearer realm=\"sluice\", error=\"{code}\", error_description=\"{description}\""
            ),
        ),
    };
    Flow::Answer(
        Answer::problem(StatusCode::UNAUTHORIZED, detail).with_header(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_str(&challenge)
                .unwrap_or(HeaderValue::from_static("Bearer realm=\"sluice\"")),
        ),
    )
}

fn refused(error: &JwtError) -> Flow {
    unauthorized(Some((error.error_code(), &error.to_string())))
}

impl Handler for JwtAuthenticator {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let token = match bearer(request) {
            Ok(token) => token,
            Err("") => return unauthorized(None),
            Err(why) => return unauthorized(Some(("invalid_request", why))),
        };
        match self.verifier.verify_cached(token, jwt::unix_now()) {
            Ok(verified) => self.admit(verified, exchange),
            Err(JwtError::UnknownKid(_)) => match self.source.refetch() {
                // Once the keys were fetched again, this phase runs again:
                // a second unknown kid finds the refetch rate-limited.
                Some(mut refreshed) => Flow::Wait(Box::pin(async move {
                    let _ = tokio::time::timeout(REFETCH_WAIT, refreshed.changed()).await;
                    Flow::Again
                })),
                None => refused(&JwtError::UnknownKid(None)),
            },
            Err(err) => refused(&err),
        }
    }
}
