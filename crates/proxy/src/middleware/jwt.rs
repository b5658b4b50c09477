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

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use serde_json::{json, Value};

    use super::*;

    /// The committed test-only RSA key of the jwt crate (generating one is
    /// slow in debug builds).
    const RSA_PEM: &str = include_str!("../../../jwt/tests/data/rsa2048-test-only.pem");

    struct Keys {
        ec: jwt::GeneratedKey,
        rsa: jwt::Signer,
        jwks: std::path::PathBuf,
    }

    /// An ES256 and an RS256 key, in a JWKS file, for the whole run.
    fn keys() -> &'static Keys {
        static KEYS: OnceLock<Keys> = OnceLock::new();
        KEYS.get_or_init(|| {
            let ec = jwt::generate_key(jwt::Algorithm::ES256, "ec-1").unwrap();
            let rsa =
                jwt::Signer::from_private_pem(jwt::Algorithm::RS256, "rsa-1", RSA_PEM).unwrap();
            let jwks =
                std::env::temp_dir().join(format!("sluice-jwt-unit-{}.json", std::process::id()));
            let set = json!({"keys": [ec.signer().jwk(), rsa.jwk()]});
            std::fs::write(&jwks, set.to_string()).unwrap();
            Keys { ec, rsa, jwks }
        })
    }

    /// A handler over [`keys`]; HS256 is allowed too, so that only the
    /// key's type stands against a token signed with the RSA key's bytes.
    fn authenticator(extra: &str) -> JwtAuthenticator {
        let yaml = format!(
            "jwks: \"{}\"\nalgorithms: [ES256, RS256, HS256]\nissuer: https://idp.example\naudience: [api]\nleeway: 0s\nmax_token_bytes: 2KiB\nforward_claims: {{sub: x-user, email: x-email, note: x-note}}\n{extra}",
            keys().jwks.display()
        );
        JwtAuthenticator::new(&serde_saphyr::from_str(&yaml).unwrap()).unwrap()
    }

    fn claims(extra: Value) -> Value {
        let mut claims = json!({"iss": "https://idp.example", "aud": "api", "sub": "alice", "exp": jwt::unix_now() + 300});
        claims
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        claims
    }

    fn ask(auth: &JwtAuthenticator, authorization: Option<&[u8]>) -> (Flow, Exchange) {
        let mut headers = http::HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        let mut exchange = Exchange::default();
        let flow = auth.request(&RequestView::get(&headers), &mut exchange);
        (flow, exchange)
    }

    fn bearer_of(token: &str) -> Vec<u8> {
        format!("Bearer {token}").into_bytes()
    }

    /// The status, problem detail and challenge of a refusal.
    fn refusal(flow: Flow) -> (u16, String, String) {
        let Flow::Answer(answer) = flow else {
            panic!("not refused: {flow:?}");
        };
        let challenge = answer
            .headers
            .iter()
            .find(|(name, _)| name == header::WWW_AUTHENTICATE)
            .map(|(_, value)| value.to_str().unwrap().to_string())
            .expect("a challenge");
        (
            answer.status.as_u16(),
            answer.detail.unwrap_or_default(),
            challenge,
        )
    }

    #[test]
    fn the_authorization_field_must_be_a_bearer_token() {
        let auth = authenticator("");
        let (status, detail, challenge) = refusal(ask(&auth, None).0);
        assert_eq!(
            (status, challenge.as_str()),
            (401, "Bearer realm=\"sluice\""),
            "{detail}"
        );
        for (value, why) in [
            (&b"Basic YWxpY2U6cHc="[..], "must be Bearer"),
            (b"Bearer", "not `Bearer TOKEN`"),
            (b"Bearer    ", "empty"),
            (b"Bearer \xff\xfe", "not text"),
        ] {
            let (status, detail, challenge) = refusal(ask(&auth, Some(value)).0);
            assert_eq!(status, 401);
            assert!(detail.contains(why), "{detail}");
            assert!(
                challenge.contains("error=\"invalid_request\""),
                "{challenge}"
            );
        }
        // The scheme is case-insensitive (RFC 7235).
        let token = keys().ec.sign(&claims(json!({}))).unwrap();
        let lower = format!("bearer {token}");
        assert!(matches!(ask(&auth, Some(lower.as_bytes())).0, Flow::Next));
    }

    #[test]
    fn a_valid_token_passes_with_its_claims_and_forged_claim_headers_are_dropped() {
        let auth = authenticator("");
        let token = keys()
            .rsa
            .sign(&claims(json!({"note": "line\r\nx-admin: yes"})))
            .unwrap();
        let (flow, exchange) = ask(&auth, Some(&bearer_of(&token)));
        assert!(matches!(flow, Flow::Next), "{flow:?}");
        assert_eq!(exchange.claims.as_ref().unwrap().claims["sub"], "alice");
        let edits = &exchange.request_headers;
        // The client's own `x-user` is replaced by the claim's.
        assert!(
            edits.set.iter().any(|(n, v)| n == "x-user" && v == "alice"),
            "{edits:?}"
        );
        // No `email` claim, and a `note` a header cannot carry: the
        // client's own fields of those names are dropped, none written.
        for name in ["x-user", "x-email", "x-note"] {
            assert!(edits.drops(name.as_bytes()), "{name}: {edits:?}");
        }
        for name in ["x-email", "x-note"] {
            assert!(
                !edits.set.iter().chain(&edits.add).any(|(n, _)| n == name),
                "{name}: {edits:?}"
            );
        }
    }

    #[test]
    fn a_missing_scope_is_403_naming_the_scopes_needed() {
        let auth = authenticator("scopes: [read, write]\n");
        let token = keys().ec.sign(&claims(json!({"scope": "read"}))).unwrap();
        let (status, detail, challenge) = refusal(ask(&auth, Some(&bearer_of(&token))).0);
        assert_eq!(status, 403);
        assert!(detail.contains("`write`"), "{detail}");
        assert!(
            challenge.contains("insufficient_scope") && challenge.contains("scope=\"read write\""),
            "{challenge}"
        );
        let token = keys()
            .ec
            .sign(&claims(json!({"scp": ["write", "read"]})))
            .unwrap();
        assert!(matches!(ask(&auth, Some(&bearer_of(&token))).0, Flow::Next));
    }

    #[test]
    fn hostile_or_stale_tokens_are_401_invalid_token() {
        use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
        let auth = authenticator("");
        let ec = &keys().ec;
        let now = jwt::unix_now();
        let good = ec.sign(&claims(json!({}))).unwrap();
        let (head, rest) = good.split_once('.').unwrap();
        let signature = rest.split_once('.').unwrap().1;
        let payload = |claims: &Value| URL_SAFE_NO_PAD.encode(claims.to_string());
        // HS256 signed with the RSA public key's modulus, naming the RSA key.
        let n = URL_SAFE_NO_PAD
            .decode(keys().rsa.jwk()["n"].as_str().unwrap())
            .unwrap();
        let confused = jwt::Signer::from_hmac_secret("rsa-1", &n)
            .unwrap()
            .sign(&claims(json!({})))
            .unwrap();
        let unsigned = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"ec-1"}"#),
            payload(&claims(json!({})))
        );
        let cases = [
            (
                ec.sign(&claims(json!({"exp": now - 10}))).unwrap(),
                "expired",
            ),
            (
                ec.sign(&claims(json!({"nbf": now + 600}))).unwrap(),
                "not valid yet",
            ),
            (
                ec.sign(&claims(json!({"iss": "https://evil.example"})))
                    .unwrap(),
                "issuer",
            ),
            (
                ec.sign(&claims(json!({"aud": "other"}))).unwrap(),
                "audience",
            ),
            (unsigned, "algorithm is not allowed"),
            (confused, "does not match its key"),
            // The payload changed under the same signature.
            (
                format!(
                    "{head}.{}.{signature}",
                    payload(&claims(json!({"sub": "admin"})))
                ),
                "signature",
            ),
            ("not.a-token".into(), "malformed"),
            (
                ec.sign(&claims(json!({"pad": "x".repeat(3000)}))).unwrap(),
                "too large",
            ),
        ];
        for (token, why) in cases {
            let (status, detail, challenge) = refusal(ask(&auth, Some(&bearer_of(&token))).0);
            assert_eq!(status, 401, "{why}");
            assert!(detail.contains(why), "{why}: {detail}");
            assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
            assert!(
                !challenge.contains(&token) && !detail.contains("admin"),
                "{challenge}"
            );
        }
    }

    /// An unknown `kid` waits for one refetch and then runs again; a
    /// second within `MIN_REFETCH` is refused at once, so made-up kids
    /// cannot make the proxy hammer the identity provider.
    #[tokio::test]
    async fn an_unknown_kid_waits_for_one_refetch_then_is_refused() {
        let auth = authenticator("");
        let stranger = jwt::generate_key(jwt::Algorithm::ES256, "stranger").unwrap();
        let token = bearer_of(&stranger.sign(&claims(json!({}))).unwrap());
        let Flow::Wait(wait) = ask(&auth, Some(&token)).0 else {
            panic!("no refetch");
        };
        let (status, detail, _) = refusal(ask(&auth, Some(&token)).0);
        assert_eq!(status, 401);
        assert!(detail.contains("key is unknown"), "{detail}");
        assert!(matches!(wait.await, Flow::Again));
        assert_eq!(refusal(ask(&auth, Some(&token)).0).0, 401);
    }
}
