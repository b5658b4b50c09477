//! `oidc`: browser login with OpenID Connect's authorization-code flow
//! and PKCE (docs/MIDDLEWARE.md). A request without a session is sent to
//! the provider (GET/HEAD; others get 401), with a random `state`, `nonce`
//! and PKCE verifier sealed in a short-lived login cookie. The callback
//! checks the state against that cookie, trades the code (and verifier)
//! for tokens, verifies the ID token (signature by the provider's JWKS,
//! issuer, audience, expiry, the nonce) and seals it with the refresh
//! token in the session cookie (AES-256-GCM; bounded in size; any of
//! `cookie_keys` opens it, the first seals, so keys rotate on reload).
//! Each request verifies the ID token again (from the verifier's cache),
//! puts its claims where a `jwt` handler's go, and refreshes it when it
//! has expired. The cookies never go upstream.

use std::{sync::Arc, time::Duration};

use anyhow::bail;
use http::{header, HeaderName, HeaderValue, Method, StatusCode};
use jwt::{AlgorithmSet, JwtError, JwtVerifier, Verified, VerifierSettings};
use subtle::ConstantTimeEq as _;

use super::{
    build::{Build, Builder},
    jwks::KeySource,
    oidc_session::{self as session, Login, Sealer, Session, TokenError},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::OidcSettings;

#[cfg(test)]
mod tests;

/// A login must come back within this.
const LOGIN_TTL: u64 = 600;
/// How long a request waits for an unknown-kid refetch.
const REFETCH_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(crate) struct OidcLogin {
    shared: Arc<Shared>,
    source: Arc<KeySource>,
    forward: Vec<(String, HeaderName)>,
}

/// What the waits (code exchange, refresh) need too.
#[derive(Debug)]
struct Shared {
    verifier: JwtVerifier,
    sealer: Sealer,
    authorization_endpoint: String,
    token_endpoint: http::Uri,
    end_session_endpoint: Option<String>,
    client_id: String,
    client_secret: Option<String>,
    redirect_url: String,
    callback_path: String,
    scopes: String,
    logout_path: String,
    after_logout: String,
    cookie: String,
    login_cookie: String,
    secure: bool,
    max_cookie_bytes: usize,
    session: u64,
    timeout: Duration,
}

impl Build for OidcSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(OidcLogin::new(self)?))
    }
}

impl OidcLogin {
    pub(crate) fn new(settings: &OidcSettings) -> anyhow::Result<Self> {
        let sealer = Sealer::new(&settings.cookie_keys)?;
        if !settings
            .cookie_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            bail!("cookie_name: letters, digits, `_` and `-` only");
        }
        for (key, path) in [
            ("logout_path", &settings.logout_path),
            ("after_logout", &settings.after_logout),
        ] {
            if HeaderValue::from_str(path).is_err() || path.is_empty() {
                bail!("{key}: not a path or URL");
            }
        }
        let issuer = settings.issuer.0.to_string();
        let discovery = session::discover(&issuer, settings.timeout)?;
        let mut algorithms = AlgorithmSet::default();
        for name in &discovery.id_token_signing_alg_values_supported {
            if let Some(alg) = jwt::Algorithm::from_jose(name) {
                algorithms.insert(alg);
            }
        }
        if algorithms.iter().next().is_none() {
            algorithms.insert(jwt::Algorithm::RS256);
        }
        let jwks_uri: http::Uri = discovery
            .jwks_uri
            .parse()
            .map_err(|_| anyhow::anyhow!("the provider's jwks_uri is not a URL"))?;
        let source = KeySource::start(None, Some(jwks_uri), Duration::from_secs(300))?;
        let mut verify = VerifierSettings::new(algorithms.iter());
        verify.issuer = Some(discovery.issuer.clone());
        verify.audiences = vec![settings.client_id.clone()];
        verify.leeway = settings.leeway;
        let verifier = JwtVerifier::new(verify, Arc::clone(&source.store))
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        let redirect_url = settings.redirect_url.0.to_string();
        let mut scopes = settings.scopes.clone();
        if !scopes.iter().any(|s| s == "openid") {
            scopes.insert(0, "openid".into());
        }
        Ok(Self {
            shared: Arc::new(Shared {
                verifier,
                sealer,
                authorization_endpoint: discovery.authorization_endpoint,
                token_endpoint: discovery
                    .token_endpoint
                    .parse()
                    .map_err(|_| anyhow::anyhow!("the provider's token_endpoint is not a URL"))?,
                end_session_endpoint: discovery.end_session_endpoint,
                client_id: settings.client_id.clone(),
                client_secret: settings
                    .client_secret
                    .as_ref()
                    .map(|s| s.expose().to_string()),
                callback_path: settings.redirect_url.0.path().to_string(),
                secure: settings
                    .cookie_secure
                    .unwrap_or(settings.redirect_url.0.scheme_str() == Some("https")),
                redirect_url,
                scopes: scopes.join(" "),
                logout_path: settings.logout_path.clone(),
                after_logout: settings.after_logout.clone(),
                login_cookie: format!("{}_login", settings.cookie_name),
                cookie: settings.cookie_name.clone(),
                max_cookie_bytes: usize::try_from(settings.max_cookie_bytes).unwrap_or(usize::MAX),
                session: settings.session.as_secs(),
                timeout: settings.timeout,
            }),
            source,
            forward: settings
                .forward_claims
                .iter()
                .map(|(claim, header)| (claim.clone(), header.0.clone()))
                .collect(),
        })
    }

    /// Claims where `jwt` puts them, and the chosen ones as headers.
    fn admit(&self, verified: Arc<Verified>, exchange: &mut Exchange) -> Flow {
        admit(&self.forward, verified, exchange);
        Flow::Next
    }
}

fn admit(forward: &[(String, HeaderName)], verified: Arc<Verified>, exchange: &mut Exchange) {
    for (claim, name) in forward {
        if let Some(value) = verified
            .claim_as_header_value(claim)
            .and_then(|v| HeaderValue::from_str(&v).ok())
        {
            exchange.request_headers.set(name.clone(), value);
        }
    }
    exchange.claims = Some(verified);
}

impl Shared {
    fn set_cookie(&self, name: &str, value: &str, max_age: u64) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
        ))
        .unwrap_or(HeaderValue::from_static(""))
    }

    /// To the provider (GET/HEAD), or 401 for requests a browser would not
    /// follow a redirect with.
    fn login(&self, request: &RequestView<'_>) -> Flow {
        if !matches!(*request.method, Method::GET | Method::HEAD) {
            return Flow::Answer(Answer::problem(
                StatusCode::UNAUTHORIZED,
                "a login is required",
            ));
        }
        let return_to = match request.query {
            Some(query) => format!("{}?{query}", request.path),
            None => request.path.to_string(),
        };
        let login = Login {
            state: self.sealer.random_text(24),
            nonce: self.sealer.random_text(24),
            verifier: self.sealer.random_text(32),
            return_to,
            expires: jwt::unix_now() + LOGIN_TTL,
        };
        let url = format!(
            "{}?{}",
            self.authorization_endpoint,
            session::form(&[
                ("response_type", "code"),
                ("client_id", &self.client_id),
                ("redirect_uri", &self.redirect_url),
                ("scope", &self.scopes),
                ("state", &login.state),
                ("nonce", &login.nonce),
                ("code_challenge", &session::challenge(&login.verifier)),
                ("code_challenge_method", "S256"),
            ])
        );
        let sealed = self
            .sealer
            .seal("login", &serde_json::to_vec(&login).unwrap_or_default());
        let Ok(location) = HeaderValue::from_str(&url) else {
            return Flow::Answer(Answer::problem(
                StatusCode::BAD_GATEWAY,
                "the provider's login URL is not valid",
            ));
        };
        Flow::Answer(Answer {
            detail: None,
            ..Answer::problem(StatusCode::FOUND, "")
                .with_header(header::LOCATION, location)
                .with_header(
                    header::SET_COOKIE,
                    self.set_cookie(&self.login_cookie, &sealed, LOGIN_TTL),
                )
                .with_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
        })
    }

    /// The session cookie for `tokens`, or why there is none.
    fn seal_session(
        &self,
        id_token: String,
        refresh_token: Option<String>,
        expires: u64,
    ) -> Result<HeaderValue, Answer> {
        let session = Session {
            id_token,
            refresh_token,
            expires,
        };
        let sealed = self
            .sealer
            .seal("session", &serde_json::to_vec(&session).unwrap_or_default());
        if sealed.len() + self.cookie.len() + 1 > self.max_cookie_bytes {
            return Err(Answer::problem(
                StatusCode::BAD_GATEWAY,
                "the provider's tokens do not fit in the session cookie (max_cookie_bytes)",
            ));
        }
        Ok(self.set_cookie(
            &self.cookie,
            &sealed,
            expires.saturating_sub(jwt::unix_now()),
        ))
    }

    /// The callback: state against the login cookie, then the code traded.
    fn callback(self: &Arc<Self>, request: &RequestView<'_>) -> Flow {
        let refused = |detail: &str| Flow::Answer(Answer::problem(StatusCode::BAD_REQUEST, detail));
        let Some(login) = session::cookie(request.fields.get_all("cookie"), &self.login_cookie)
            .and_then(|sealed| self.sealer.open("login", sealed))
            .and_then(|plain| serde_json::from_slice::<Login>(&plain).ok())
            .filter(|login| login.expires > jwt::unix_now())
        else {
            return refused("no login is under way (or it is too old): start again");
        };
        let state = session::query_param(request.query, "state").unwrap_or_default();
        if !bool::from(state.as_bytes().ct_eq(login.state.as_bytes())) {
            return refused("the login's state does not match: forged, or from another login");
        }
        if session::query_param(request.query, "error").is_some() {
            return Flow::Answer(Answer::problem(
                StatusCode::UNAUTHORIZED,
                "the provider refused the login",
            ));
        }
        let Some(code) = session::query_param(request.query, "code") else {
            return refused("the callback has no code");
        };
        let shared = Arc::clone(self);
        Flow::Wait(Box::pin(async move {
            let body = session::form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", &shared.redirect_url),
                ("code_verifier", &login.verifier),
                ("client_id", &shared.client_id),
            ]);
            let tokens = session::tokens(
                &shared.token_endpoint,
                &shared.client_id,
                shared.client_secret.as_deref(),
                body,
                shared.timeout,
            )
            .await;
            let tokens = match tokens {
                Ok(tokens) => tokens,
                Err(TokenError::Refused) => {
                    return Flow::Answer(Answer::problem(
                        StatusCode::UNAUTHORIZED,
                        "the provider refused the authorization code (used already, or stale)",
                    ));
                }
                Err(TokenError::Unavailable) => {
                    return Flow::Answer(Answer::problem(
                        StatusCode::BAD_GATEWAY,
                        "the provider's token endpoint gave no tokens",
                    ));
                }
            };
            let Some(id_token) = tokens.id_token else {
                return Flow::Answer(Answer::problem(
                    StatusCode::BAD_GATEWAY,
                    "the provider gave no ID token",
                ));
            };
            let verified = match shared.verifier.verify(&id_token, jwt::unix_now()) {
                Ok(verified) => verified,
                Err(_) => {
                    return Flow::Answer(Answer::problem(
                        StatusCode::UNAUTHORIZED,
                        "the ID token is not valid",
                    ))
                }
            };
            let nonce = verified
                .claims
                .get("nonce")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            if !bool::from(nonce.as_bytes().ct_eq(login.nonce.as_bytes())) {
                return Flow::Answer(Answer::problem(
                    StatusCode::UNAUTHORIZED,
                    "the ID token's nonce is not this login's",
                ));
            }
            let cookie = match shared.seal_session(
                id_token,
                tokens.refresh_token,
                jwt::unix_now() + shared.session,
            ) {
                Ok(cookie) => cookie,
                Err(answer) => return Flow::Answer(answer),
            };
            let back = if login.return_to.starts_with('/') && !login.return_to.starts_with("//") {
                login.return_to
            } else {
                "/".into()
            };
            Flow::Answer(Answer {
                detail: None,
                ..Answer::problem(StatusCode::FOUND, "")
                    .with_header(
                        header::LOCATION,
                        HeaderValue::from_str(&back).unwrap_or(HeaderValue::from_static("/")),
                    )
                    .with_header(header::SET_COOKIE, cookie)
                    .with_header(
                        header::SET_COOKIE,
                        shared.set_cookie(&shared.login_cookie, "", 0),
                    )
                    .with_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
            })
        }))
    }

    /// Ends the session here, then at the provider when it can.
    fn logout(&self, session: Option<Session>) -> Flow {
        let location = match (&self.end_session_endpoint, session) {
            (Some(end), Some(session)) => {
                let mut pairs = vec![
                    ("id_token_hint", session.id_token.as_str()),
                    ("client_id", self.client_id.as_str()),
                ];
                if self.after_logout.contains("://") {
                    pairs.push(("post_logout_redirect_uri", &self.after_logout));
                }
                format!("{end}?{}", session::form(&pairs))
            }
            _ => self.after_logout.clone(),
        };
        Flow::Answer(Answer {
            detail: None,
            ..Answer::problem(StatusCode::FOUND, "")
                .with_header(
                    header::LOCATION,
                    HeaderValue::from_str(&location).unwrap_or(HeaderValue::from_static("/")),
                )
                .with_header(header::SET_COOKIE, self.set_cookie(&self.cookie, "", 0))
                .with_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
        })
    }

    /// A new ID token for an expired one, and a new session cookie.
    fn refresh(
        self: &Arc<Self>,
        session: Session,
        forward: Vec<(String, HeaderName)>,
        login: Flow,
    ) -> Flow {
        let Some(refresh_token) = session.refresh_token else {
            return login;
        };
        let shared = Arc::clone(self);
        Flow::Wait(Box::pin(async move {
            let body = session::form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh_token),
                ("client_id", &shared.client_id),
            ]);
            let tokens = session::tokens(
                &shared.token_endpoint,
                &shared.client_id,
                shared.client_secret.as_deref(),
                body,
                shared.timeout,
            )
            .await;
            let Ok(session::Tokens {
                id_token: Some(id_token),
                refresh_token: next,
            }) = tokens
            else {
                return login;
            };
            let Ok(verified) = shared.verifier.verify(&id_token, jwt::unix_now()) else {
                return login;
            };
            let cookie = match shared.seal_session(
                id_token,
                next.or(Some(refresh_token)),
                session.expires,
            ) {
                Ok(cookie) => cookie,
                Err(answer) => return Flow::Answer(answer),
            };
            let verified = Arc::new(verified);
            Flow::Apply(Box::new(move |exchange| {
                exchange
                    .response_headers
                    .add
                    .push((header::SET_COOKIE, cookie));
                admit(&forward, verified, exchange);
                Flow::Next
            }))
        }))
    }
}

impl Handler for OidcLogin {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let shared = &self.shared;
        for (_, name) in &self.forward {
            exchange.request_headers.remove.push(name.clone());
        }
        if request.path == shared.callback_path {
            return shared.callback(request);
        }
        let session = session::cookie(request.fields.get_all("cookie"), &shared.cookie)
            .and_then(|sealed| shared.sealer.open("session", sealed))
            .and_then(|plain| serde_json::from_slice::<Session>(&plain).ok())
            .filter(|session| session.expires > jwt::unix_now());
        if request.path == shared.logout_path {
            return shared.logout(session);
        }
        let Some(session) = session else {
            return shared.login(request);
        };
        session::strip_cookies(request, [&shared.cookie, &shared.login_cookie], exchange);
        match shared
            .verifier
            .verify_cached(&session.id_token, jwt::unix_now())
        {
            Ok(verified) => self.admit(verified, exchange),
            Err(JwtError::Expired) => {
                shared.refresh(session, self.forward.clone(), shared.login(request))
            }
            Err(JwtError::UnknownKid(_)) => match self.source.refetch() {
                Some(mut refreshed) => Flow::Wait(Box::pin(async move {
                    let _ = tokio::time::timeout(REFETCH_WAIT, refreshed.changed()).await;
                    Flow::Again
                })),
                None => shared.login(request),
            },
            Err(_) => shared.login(request),
        }
    }
}
