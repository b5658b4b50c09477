//! `sluice token`: test keys and signed tokens, so that the `jwt` handler
//! can be tried and benchmarked without an identity provider.

use std::{
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice token keys --alg RS256 --kid demo --out certs\n  \
    sluice token sign --key certs/demo.key.pem --alg RS256 --kid demo \\\n      \
    --claim iss=https://issuer.example --claim aud=petstore --claim scope='pets:read pets:write' --expires-in 1h\n\n\
The keys command writes DIR/jwks.json (the public keys, for `middleware.jwt.jwks`) and\n\
DIR/KID.key.pem (the private key, mode 0600). For HS256 the JWKS itself holds the secret.")]
pub(crate) struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a key pair: a JWKS with the public key and a PEM private key.
    Keys {
        /// RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA or HS256.
        #[arg(long, default_value = "RS256")]
        alg: String,
        /// The key id, also the private key's file name.
        #[arg(long, default_value = "sluice")]
        kid: String,
        /// Directory to write into (created if missing).
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Sign a token with a private key; prints it.
    Sign {
        /// The private key (PEM) written by `sluice token keys`, or for HS256 its jwks.json.
        #[arg(long)]
        key: PathBuf,
        #[arg(long, default_value = "RS256")]
        alg: String,
        #[arg(long, default_value = "sluice")]
        kid: String,
        /// NAME=VALUE (a string) or NAME:=JSON (a number, list, ...); repeatable.
        #[arg(long = "claim", value_name = "CLAIM")]
        claims: Vec<String>,
        /// Sets `exp` this far from now (`1h`, `15m`); `0s` leaves it out.
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        expires_in: Duration,
    },
}

pub(crate) fn run(args: TokenArgs) -> ExitCode {
    let result = match args.command {
        TokenCommand::Keys { alg, kid, out } => keys(&alg, &kid, &out),
        TokenCommand::Sign {
            key,
            alg,
            kid,
            claims,
            expires_in,
        } => sign(&key, &alg, &kid, &claims, expires_in),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice token: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn algorithm(name: &str) -> anyhow::Result<jwt::Algorithm> {
    name.parse::<jwt::Algorithm>()
        .map_err(|err| anyhow::anyhow!("--alg: {err}"))
}

fn keys(alg: &str, kid: &str, out: &Path) -> anyhow::Result<()> {
    let alg = algorithm(alg)?;
    if kid.is_empty()
        || !kid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        bail!("--kid: use letters, digits, '-', '_' and '.'");
    }
    let key = jwt::generate_key(alg, kid).map_err(|err| anyhow::anyhow!("{err}"))?;
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let jwks = out.join("jwks.json");
    fs::write(&jwks, key.jwks_json())
        .with_context(|| format!("cannot write {}", jwks.display()))?;
    println!("{}", jwks.display());
    if let Some(pem) = key.private_pem() {
        let path = out.join(format!("{kid}.key.pem"));
        crate::secret::write_private(&path, pem.as_bytes())?;
        println!("{}", path.display());
    }
    Ok(())
}

fn sign(
    key: &Path,
    alg: &str,
    kid: &str,
    claims: &[String],
    expires_in: Duration,
) -> anyhow::Result<()> {
    let alg = algorithm(alg)?;
    let text = fs::read_to_string(key).with_context(|| format!("cannot read {}", key.display()))?;
    let signer = if alg == jwt::Algorithm::HS256 {
        let secret = hmac_secret(&text, kid).with_context(|| {
            format!(
                "{}: for HS256 give the jwks.json holding the secret",
                key.display()
            )
        })?;
        jwt::Signer::from_hmac_secret(kid, &secret)
    } else {
        jwt::Signer::from_private_pem(alg, kid, &text)
    }
    .map_err(|err| anyhow::anyhow!("{}: {err}", key.display()))?;
    let now = jwt::unix_now();
    let mut payload = Map::new();
    payload.insert("iat".into(), now.into());
    if !expires_in.is_zero() {
        payload.insert("exp".into(), (now + expires_in.as_secs()).into());
    }
    for claim in claims {
        let (name, value) = parse_claim(claim)?;
        payload.insert(name, value);
    }
    let token = signer
        .sign(&Value::Object(payload))
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    println!("{token}");
    Ok(())
}

/// `name=text` or `name:=json`.
fn parse_claim(claim: &str) -> anyhow::Result<(String, Value)> {
    if let Some((name, json)) = claim.split_once(":=") {
        let value = serde_json::from_str(json)
            .with_context(|| format!("--claim {claim}: the value after := must be JSON"))?;
        return Ok((name.to_string(), value));
    }
    match claim.split_once('=') {
        Some((name, text)) if !name.is_empty() => {
            Ok((name.to_string(), Value::String(text.into())))
        }
        _ => bail!("--claim {claim}: use NAME=VALUE or NAME:=JSON"),
    }
}

/// The `k` of the JWKS key `kid` (an oct key), decoded.
fn hmac_secret(jwks: &str, kid: &str) -> anyhow::Result<Vec<u8>> {
    use base64::Engine as _;
    let doc: Value = serde_json::from_str(jwks)?;
    let k = doc["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|key| key["kid"] == kid && key["kty"] == "oct")
        .and_then(|key| key["k"].as_str())
        .with_context(|| format!("no oct key with kid `{kid}`"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(k)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_parse_as_text_or_json() {
        assert_eq!(
            parse_claim("sub=alice").unwrap(),
            ("sub".into(), Value::from("alice"))
        );
        assert_eq!(parse_claim("n:=5").unwrap(), ("n".into(), Value::from(5)));
        assert_eq!(
            parse_claim("scp:=[\"a\",\"b\"]").unwrap().1,
            serde_json::json!(["a", "b"])
        );
        assert_eq!(parse_claim("url=a=b").unwrap().1, Value::from("a=b"));
        for bad in ["noequals", "=x", "n:=not json"] {
            assert!(parse_claim(bad).is_err(), "{bad}");
        }
    }
}
