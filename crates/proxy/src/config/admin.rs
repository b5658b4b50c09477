//! `admin:`: where the admin listener is, the bearer token that guards it,
//! the names it answers to and the endpoints it answers without the
//! token (docs/CONFIG.md, "Admin API"). The token never reaches a log or
//! `/config`: it is a [`Secret`], whose `Debug` does not show it.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::{Location, Spanned};

use super::{env::FromEnv, error::Problem, secret::Secret, Config};

/// The admin endpoints that only read; `POST /reload` changes state.
pub const READ_ENDPOINTS: &[&str] = &[
    "/health",
    "/ready",
    "/metrics",
    "/config",
    "/upstreams",
    "/stats.json",
];

/// Shortest token accepted: guessing 16 random characters is out of reach.
const MIN_TOKEN: usize = 16;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    /// `IP:PORT`.
    #[schemars(with = "String")]
    pub address: Spanned<String>,
    /// The bearer token, as written (`${VAR}` to take it from the
    /// environment); empty: none. `/config` shows the token in use
    /// instead (`bearer`, which `token_file` may have given).
    #[serde(default, skip_serializing)]
    #[schemars(with = "Option<Secret>")]
    pub token: Option<Spanned<Secret>>,
    /// A file holding the token (trailing white space dropped), read at
    /// start and at every reload.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
    /// Names a request's `Host` may carry besides an IP literal and
    /// `localhost` (DNS rebinding).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub hosts: Vec<Spanned<String>>,
    /// Read endpoints answered without the token when one is set.
    #[serde(default = "default_open")]
    #[schemars(with = "Vec<String>")]
    pub open: Vec<Spanned<String>>,
    /// The token of `token` or `token_file`, once read and checked: not
    /// read from the file, shown as `token` (its marker).
    #[serde(skip_deserializing, rename = "token")]
    pub bearer: Option<Secret>,
}

fn default_open() -> Vec<Spanned<String>> {
    let unknown = Location::UNKNOWN;
    ["/health", "/ready", "/metrics"]
        .iter()
        .map(|path| Spanned::new((*path).to_string(), unknown, unknown))
        .collect()
}

impl AdminSettings {
    /// The address, once validation has parsed it.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.address.value.parse().ok()
    }

    /// Listens on an address other hosts can reach (not 127.0.0.0/8, ::1).
    pub fn beyond_loopback(&self) -> bool {
        self.socket_addr().is_some_and(|a| !a.ip().is_loopback())
    }

    /// `path` is a read endpoint that `open` lists.
    pub fn is_open(&self, path: &str) -> bool {
        self.open.iter().any(|p| p.value == path)
    }
}

/// The values `${VAR}` took from the environment: `/config` shows none of
/// them. `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Substituted(pub Vec<FromEnv>);

impl std::fmt::Debug for Substituted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Substituted({} values)", self.0.len())
    }
}

/// Checks `admin` and reads its token (`token_file` relative to the
/// working directory). Errors point at the key and never show the token.
pub(crate) fn check(admin: &mut AdminSettings) -> Result<(), Problem> {
    for (i, path) in admin.open.iter().enumerate() {
        if !READ_ENDPOINTS.contains(&path.value.as_str()) {
            let why = if path.value == "/reload" {
                "POST /reload changes state: it always needs the token".to_string()
            } else {
                format!(
                    "`{}` is not one of {}",
                    path.value,
                    READ_ENDPOINTS.join(", ")
                )
            };
            return Err((path.referenced, format!("admin.open[{i}]"), why));
        }
    }
    for (i, host) in admin.hosts.iter().enumerate() {
        let name = &host.value;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return Err((
                host.referenced,
                format!("admin.hosts[{i}]"),
                format!("`{name}` is not a host name (letters, digits, `-` and `.`; no port)"),
            ));
        }
    }
    admin.bearer = match (&admin.token, &admin.token_file) {
        (Some(_), Some(file)) => {
            return Err((
                file.referenced,
                "admin.token_file".into(),
                "give `token` or `token_file`, not both".into(),
            ))
        }
        (Some(token), None) if token.value.expose().is_empty() => None,
        (Some(token), None) => Some(
            valid_token(token.value.expose())
                .map_err(|why| (token.referenced, "admin.token".into(), why))?,
        ),
        (None, Some(file)) => {
            let at = |why: String| (file.referenced, "admin.token_file".into(), why);
            let text = std::fs::read_to_string(&file.value)
                .map_err(|err| at(format!("cannot read `{}`: {err}", file.value)))?;
            let token = text.trim_end();
            if token.is_empty() {
                return Err(at(format!("`{}` is empty", file.value)));
            }
            Some(valid_token(token).map_err(|why| at(format!("`{}`: {why}", file.value)))?)
        }
        (None, None) => None,
    };
    Ok(())
}

/// Visible ASCII (it travels in a header), at least [`MIN_TOKEN`] long.
fn valid_token(token: &str) -> Result<Secret, String> {
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be visible ASCII characters, without spaces".into());
    }
    if token.len() < MIN_TOKEN {
        return Err(format!(
            "the token must be at least {MIN_TOKEN} characters (e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(Secret::new(token.to_string()))
}

/// What is legal but unsafe, for `--check` and the start to say.
pub fn warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(admin) = &config.admin {
        if admin.beyond_loopback() && admin.bearer.is_none() {
            warnings.push(format!(
                "admin.address {} listens beyond loopback and admin.token is not set: \
                 whoever reaches it reads /config and /upstreams, and POST /reload is refused \
                 (403) until a token is set; set admin.token or admin.token_file, or listen on \
                 127.0.0.1 (docs/CONFIG.md, \"Admin API\")",
                admin.address.value
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    fn parse(admin: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
        let text = format!("listeners: [{{ address: 127.0.0.1:0 }}]\nadmin: {admin}\n");
        crate::config::parse(&text, Path::new("t.yaml"), |name| {
            (name == "TOKEN").then(|| "from-the-environment-0123".to_string())
        })
    }

    #[test]
    fn a_token_from_the_environment_or_a_file() {
        let config = parse("{ address: 0.0.0.0:0, token: \"${TOKEN}\" }").unwrap();
        let admin = config.admin.unwrap();
        assert_eq!(admin.bearer.unwrap().expose(), "from-the-environment-0123");
        assert!(!format!("{:?}", admin.token).contains("from-the-environment"));

        let dir = std::env::temp_dir().join(format!("sluice-admin-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        let config = parse(&format!(
            "{{ address: 0.0.0.0:0, token_file: {} }}",
            file.display()
        ));
        let bearer = config.unwrap().admin.unwrap().bearer.unwrap();
        assert_eq!(bearer.expose(), "0123456789abcdef0123");
        // An empty token is no token (`${ADMIN_TOKEN:}` for an optional one).
        let config = parse("{ address: 0.0.0.0:0, token: \"\" }").unwrap();
        assert!(config.admin.unwrap().bearer.is_none());
    }

    #[test]
    fn bad_tokens_name_the_key_and_never_the_token() {
        let err = parse("{ address: 0.0.0.0:0,\n  token_file: /nonexistent/token }").unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (3, "admin.token_file"));
        assert!(err.message.contains("/nonexistent/token"), "{err}");
        let empty = std::env::temp_dir().join(format!("sluice-empty-{}", std::process::id()));
        std::fs::write(&empty, "\n").unwrap();
        let err = parse(&format!(
            "{{ address: 0.0.0.0:0, token_file: {} }}",
            empty.display()
        ))
        .unwrap_err();
        assert!(err.message.ends_with("is empty"), "{err}");
        let err = parse("{ address: 0.0.0.0:0, token: short-secret }").unwrap_err();
        assert_eq!(err.key, "admin.token");
        assert!(!err.to_string().contains("short-secret"), "{err}");
        let err = parse("{ address: 0.0.0.0:0, token: \"with a space 0123456\" }").unwrap_err();
        assert!(!err.to_string().contains("space 0123"), "{err}");
        let err = parse("{ address: 0.0.0.0:0, token: \"${TOKEN}\", token_file: /x }");
        assert_eq!(err.unwrap_err().key, "admin.token_file");
    }

    #[test]
    fn open_lists_read_endpoints_and_hosts_are_names() {
        let config = parse("{ address: 127.0.0.1:0 }").unwrap();
        let admin = config.admin.unwrap();
        assert!(admin.is_open("/health") && admin.is_open("/metrics"));
        assert!(!admin.is_open("/config") && !admin.is_open("/upstreams"));
        let err = parse("{ address: 127.0.0.1:0, open: [/health, /reload] }").unwrap_err();
        assert_eq!(err.key, "admin.open[1]");
        assert!(err.message.contains("always needs the token"), "{err}");
        let err = parse("{ address: 127.0.0.1:0, open: [/nope] }").unwrap_err();
        assert!(err.message.contains("/upstreams"), "{err}");
        let err = parse("{ address: 127.0.0.1:0, hosts: [\"admin.example:9901\"] }").unwrap_err();
        assert_eq!(err.key, "admin.hosts[0]");
    }

    #[test]
    fn warns_beyond_loopback_without_a_token() {
        let warned = |admin: &str| !super::warnings(&parse(admin).unwrap()).is_empty();
        assert!(warned("{ address: 0.0.0.0:9901 }"));
        assert!(warned("{ address: \"[::]:9901\" }"));
        assert!(!warned("{ address: 127.0.0.1:9901 }"));
        assert!(!warned("{ address: \"[::1]:9901\" }"));
        assert!(!warned("{ address: 0.0.0.0:9901, token: \"${TOKEN}\" }"));
    }
}
