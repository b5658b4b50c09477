//! The handler's decisions without a provider: the login redirect and its
//! cookie, the callback's checks before the code is traded, sessions
//! (good, tampered, expired, signed by another key), logout, and the
//! settings refused before discovery. Trading a code and refreshing a
//! token call the provider: tests/it/who_may_pass/oidc.rs.

use std::sync::OnceLock;

use serde_json::json;

use super::*;
use crate::config::Secret;

const ISSUER: &str = "https://idp.example";

fn cookie_key(byte: u8) -> Secret {
    let text = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [byte; 32]);
    serde_json::from_value(json!(text)).unwrap()
}

/// The provider's signing key (ES256, `kid` "idp-1") and its JWKS file.
fn provider() -> &'static (jwt::GeneratedKey, std::path::PathBuf) {
    static PROVIDER: OnceLock<(jwt::GeneratedKey, std::path::PathBuf)> = OnceLock::new();
    PROVIDER.get_or_init(|| {
        let key = jwt::generate_key(jwt::Algorithm::ES256, "idp-1").unwrap();
        let path =
            std::env::temp_dir().join(format!("sluice-oidc-unit-{}.json", std::process::id()));
        std::fs::write(&path, key.jwks_json()).unwrap();
        (key, path)
    })
}

/// A handler as `OidcLogin::new` makes one after discovery, its keys
/// from [`provider`]'s file.
fn handler() -> OidcLogin {
    let source = KeySource::start(provider().1.to_str(), None, Duration::from_secs(3600)).unwrap();
    let mut verify = VerifierSettings::new([jwt::Algorithm::ES256]);
    verify.issuer = Some(ISSUER.into());
    verify.audiences = vec!["app".into()];
    verify.leeway = Duration::ZERO;
    let verifier = JwtVerifier::new(verify, Arc::clone(&source.store)).unwrap();
    OidcLogin {
        shared: Arc::new(Shared {
            verifier,
            sealer: Sealer::new(&[cookie_key(7)]).unwrap(),
            authorization_endpoint: format!("{ISSUER}/authorize"),
            token_endpoint: "http://127.0.0.1:9/token".parse().unwrap(),
            end_session_endpoint: Some(format!("{ISSUER}/logout")),
            client_id: "app".into(),
            client_secret: None,
            redirect_url: "https://shop.example/callback".into(),
            callback_path: "/callback".into(),
            scopes: "openid email".into(),
            logout_path: "/logout".into(),
            after_logout: "https://shop.example/bye".into(),
            cookie: "sid".into(),
            login_cookie: "sid_login".into(),
            secure: true,
            max_cookie_bytes: 4096,
            session: 3600,
            timeout: Duration::from_secs(1),
        }),
        source,
        forward: vec![("email".into(), HeaderName::from_static("x-email"))],
    }
}

fn id_token(extra: serde_json::Value) -> String {
    let mut claims = json!({"iss": ISSUER, "aud": "app", "sub": "alice", "email": "a@shop.example", "exp": jwt::unix_now() + 300});
    claims
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    provider().0.sign(&claims).unwrap()
}

fn session_cookie(
    oidc: &OidcLogin,
    id_token: String,
    refresh: Option<&str>,
    expires: u64,
) -> String {
    let session = Session {
        id_token,
        refresh_token: refresh.map(str::to_string),
        expires,
    };
    oidc.shared
        .sealer
        .seal("session", &serde_json::to_vec(&session).unwrap())
}

fn sealed_login(oidc: &OidcLogin, state: &str, expires: u64) -> String {
    let login = Login {
        state: state.into(),
        nonce: "n".into(),
        verifier: "v".into(),
        return_to: "/".into(),
        expires,
    };
    oidc.shared
        .sealer
        .seal("login", &serde_json::to_vec(&login).unwrap())
}

/// `method target` with the `Cookie` field `cookie`, through `oidc`.
fn ask(
    oidc: &OidcLogin,
    method: &http::Method,
    target: &str,
    cookie: Option<&str>,
) -> (Flow, Exchange) {
    let mut headers = http::HeaderMap::new();
    headers.insert("x-email", HeaderValue::from_static("forged@evil.example"));
    if let Some(cookie) = cookie {
        headers.insert(header::COOKIE, HeaderValue::from_str(cookie).unwrap());
    }
    let (path, query) = target
        .split_once('?')
        .map_or((target, None), |(p, q)| (p, Some(q)));
    let request = RequestView {
        method,
        path,
        query,
        ..RequestView::get(&headers)
    };
    let mut exchange = Exchange::default();
    let flow = oidc.request(&request, &mut exchange);
    (flow, exchange)
}

fn get(oidc: &OidcLogin, target: &str, cookie: Option<&str>) -> (Flow, Exchange) {
    ask(oidc, &http::Method::GET, target, cookie)
}

fn answer(flow: Flow) -> Answer {
    match flow {
        Flow::Answer(answer) => answer,
        other => panic!("not answered: {other:?}"),
    }
}

fn fields<'a>(answer: &'a Answer, name: &str) -> Vec<&'a str> {
    answer
        .headers
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.to_str().unwrap())
        .collect()
}

#[test]
fn settings_are_checked_before_the_provider_is_asked() {
    let settings = |extra: &str| -> OidcSettings {
        serde_saphyr::from_str(&format!(
            "issuer: \"http://127.0.0.1:9\"\nclient_id: app\nredirect_url: \"https://shop.example/callback\"\n{extra}"
        ))
        .unwrap()
    };
    let key = "cookie_keys: [\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]\n";
    for (extra, why) in [
        ("cookie_keys: []\n", "at least one key"),
        ("cookie_keys: [\"c2hvcnQ=\"]\n", "cookie_keys[0]"),
        (
            &format!("{key}cookie_name: \"sid; Path=/\"\n"),
            "cookie_name",
        ),
        (&format!("{key}logout_path: \"\"\n"), "logout_path"),
        (
            &format!("{key}after_logout: \"/bye\\r\\nSet-Cookie: x=1\"\n"),
            "after_logout",
        ),
    ] {
        let err = OidcLogin::new(&settings(extra)).unwrap_err().to_string();
        assert!(err.contains(why), "{extra}: {err}");
    }
}

#[test]
fn a_browser_without_a_session_is_sent_to_the_provider_with_pkce() {
    let oidc = handler();
    let login = answer(get(&oidc, "/orders?page=2", None).0);
    assert_eq!(login.status, StatusCode::FOUND);
    let location = fields(&login, "location")[0];
    let query = location
        .strip_prefix("https://idp.example/authorize?")
        .expect(location);
    let param = |name| session::query_param(Some(query), name).unwrap_or_default();
    assert_eq!(param("client_id"), "app");
    assert_eq!(param("redirect_uri"), "https://shop.example/callback");
    assert_eq!(
        (
            param("response_type").as_str(),
            param("code_challenge_method").as_str()
        ),
        ("code", "S256")
    );
    let cookie = fields(&login, "set-cookie")[0];
    assert!(
        cookie.ends_with("; Path=/; HttpOnly; SameSite=Lax; Max-Age=600; Secure"),
        "{cookie}"
    );
    // The login cookie holds what the callback must find: this state,
    // the verifier of this challenge, the nonce, and where to go back.
    let sealed = cookie
        .strip_prefix("sid_login=")
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let kept: Login =
        serde_json::from_slice(&oidc.shared.sealer.open("login", sealed).unwrap()).unwrap();
    assert_eq!(kept.state, param("state"));
    assert_eq!(kept.nonce, param("nonce"));
    assert_eq!(session::challenge(&kept.verifier), param("code_challenge"));
    assert_eq!(kept.return_to, "/orders?page=2");
    assert!(
        !location.contains(&kept.verifier),
        "the verifier never leaves the cookie"
    );
    // A request a browser would not follow a redirect with is 401.
    let post = answer(ask(&oidc, &http::Method::POST, "/orders", None).0);
    assert_eq!(post.status, StatusCode::UNAUTHORIZED);
    assert!(fields(&post, "location").is_empty());
}

#[test]
fn the_callback_needs_this_browsers_login_and_its_state() {
    let oidc = handler();
    let now = jwt::unix_now();
    let good = format!("sid_login={}", sealed_login(&oidc, "s1", now + 60));
    let mut tampered = sealed_login(&oidc, "s1", now + 60).into_bytes();
    tampered[20] ^= 1;
    let tampered = format!("sid_login={}", String::from_utf8(tampered).unwrap());
    let stale = format!("sid_login={}", sealed_login(&oidc, "s1", now - 1));
    // A session cookie (another purpose) does not open as a login.
    let session = session_cookie(&oidc, id_token(json!({})), None, now + 60);
    let swapped = format!("sid_login={session}");
    for (cookie, query, status) in [
        (None, "code=c&state=s1", 400),
        (Some(&tampered), "code=c&state=s1", 400),
        (Some(&stale), "code=c&state=s1", 400),
        (Some(&swapped), "code=c&state=s1", 400),
        (Some(&good), "code=c&state=s2", 400),
        (Some(&good), "code=c", 400),
        (Some(&good), "state=s1", 400),
        (Some(&good), "error=access_denied&state=s1", 401),
    ] {
        let refused = answer(
            get(
                &oidc,
                &format!("/callback?{query}"),
                cookie.map(String::as_str),
            )
            .0,
        );
        assert_eq!(refused.status.as_u16(), status, "{cookie:?} {query}");
    }
    // All checked: the code is traded (a call to the provider).
    assert!(matches!(
        get(&oidc, "/callback?code=c&state=s1", Some(&good)).0,
        Flow::Wait(_)
    ));
}

#[test]
fn a_session_passes_with_its_claims_and_without_its_cookies() {
    let oidc = handler();
    let sealed = session_cookie(&oidc, id_token(json!({})), None, jwt::unix_now() + 60);
    let cookie = format!("theme=dark; sid={sealed}; sid_login=x");
    let (flow, exchange) = get(&oidc, "/orders", Some(&cookie));
    assert!(matches!(flow, Flow::Next), "{flow:?}");
    assert_eq!(exchange.claims.as_ref().unwrap().claims["sub"], "alice");
    let upstream = &exchange.request_headers;
    assert!(upstream.drops(b"x-email"), "the client's own x-email goes");
    assert!(upstream.set.contains(&(
        HeaderName::from_static("x-email"),
        HeaderValue::from_static("a@shop.example")
    )));
    assert!(
        upstream
            .set
            .contains(&(header::COOKIE, HeaderValue::from_static("theme=dark"))),
        "{upstream:?}"
    );
}

#[test]
fn a_bad_or_stale_session_is_sent_to_log_in_again() {
    let oidc = handler();
    let now = jwt::unix_now();
    let other_key = jwt::generate_key(jwt::Algorithm::ES256, "idp-1").unwrap();
    let forged = other_key
        .sign(&json!({"iss": ISSUER, "aud": "app", "sub": "admin", "exp": now + 300}))
        .unwrap();
    let mut tampered = session_cookie(&oidc, id_token(json!({})), None, now + 60).into_bytes();
    tampered[30] ^= 1;
    let stranger = Sealer::new(&[cookie_key(8)]).unwrap();
    let cookies = [
        String::from_utf8(tampered).unwrap(),
        sealed_login(&oidc, "s", now + 60),
        stranger.seal("session", br#"{"id_token":"x","expires":9999999999}"#),
        session_cookie(&oidc, id_token(json!({})), None, now - 1),
        session_cookie(&oidc, forged, None, now + 60),
        session_cookie(&oidc, id_token(json!({"aud": "other-app"})), None, now + 60),
        session_cookie(&oidc, id_token(json!({"exp": now - 10})), None, now + 60),
        "A".repeat(20_000),
    ];
    for sealed in cookies {
        let (flow, exchange) = get(&oidc, "/orders", Some(&format!("sid={sealed}")));
        let login = answer(flow);
        assert_eq!(login.status, StatusCode::FOUND);
        assert!(fields(&login, "location")[0].starts_with("https://idp.example/authorize?"));
        assert!(exchange.claims.is_none());
    }
    // An expired ID token with a refresh token is refreshed (a call).
    let refreshable = session_cookie(
        &oidc,
        id_token(json!({"exp": now - 10})),
        Some("r"),
        now + 60,
    );
    assert!(matches!(
        get(&oidc, "/orders", Some(&format!("sid={refreshable}"))).0,
        Flow::Wait(_)
    ));
}

#[test]
fn logout_ends_the_session_here_and_at_the_provider() {
    let oidc = handler();
    let token = id_token(json!({}));
    let sealed = session_cookie(&oidc, token.clone(), None, jwt::unix_now() + 60);
    let out = answer(get(&oidc, "/logout", Some(&format!("sid={sealed}"))).0);
    assert_eq!(out.status, StatusCode::FOUND);
    let location = fields(&out, "location")[0];
    let query = location
        .strip_prefix("https://idp.example/logout?")
        .expect(location);
    assert_eq!(
        session::query_param(Some(query), "id_token_hint").unwrap(),
        token
    );
    assert_eq!(
        session::query_param(Some(query), "post_logout_redirect_uri").unwrap(),
        "https://shop.example/bye"
    );
    assert!(fields(&out, "set-cookie")[0]
        .starts_with("sid=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"));
    // No session (or a forged one): no hint to give, straight to after_logout.
    let out = answer(get(&oidc, "/logout", Some("sid=forged")).0);
    assert_eq!(fields(&out, "location"), ["https://shop.example/bye"]);
}

#[test]
fn tokens_too_large_for_the_cookie_are_502_not_a_broken_cookie() {
    let oidc = handler();
    let fits = oidc
        .shared
        .seal_session("t".repeat(100), None, jwt::unix_now() + 60);
    assert!(fits.is_ok());
    let Err(refused) = oidc
        .shared
        .seal_session("t".repeat(4096), None, jwt::unix_now() + 60)
    else {
        panic!("an oversized cookie was made");
    };
    assert_eq!(refused.status, StatusCode::BAD_GATEWAY);
}
