//! The parsers of the handlers that decide who may pass (issue 48): the
//! htpasswd file (`basic_auth`), the keys file (`api_key`), `Authorization:
//! Basic` values, Envoy's gRPC CheckResponse (`ext_authz`), the OIDC
//! callback's query and cookies, and the session cookie's opening. The
//! first byte picks the parser; the rest is its input.
//!
//! - A file refused is refused by line number, and its message never
//!   holds the text after a line's first `:` (a hash or a key) when that
//!   text is longer than 8 bytes.
//! - Basic credentials found are the base64 of `user:password`.
//! - A CheckResponse that denies has a 4xx or 5xx status.
//! - No input opens as a session cookie unless it was sealed with the key:
//!   one sealed here opens, and changing any of its bytes makes it not.
//! - A query parameter or cookie found is a value the input holds.

use base64::Engine as _;
use proxy::fuzzing;

/// Each line's secret (the text after its first `:`, when longer than 8
/// bytes): its line number and the text.
fn secrets(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| Some((n, line.split_once(':')?.1.trim())))
        .filter(|(_, secret)| secret.len() > 8)
        .collect()
}

/// `text` with line `n`'s secret blanked out, the rest as it was.
fn blanked(text: &str, n: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if let Some((name, _)) = lines[n].split_once(':') {
        lines[n] = format!("{name}:{}", "\u{1}".repeat(9));
    }
    lines.join("\n")
}

/// A file's refusal names the line and quotes no secret. A secret's text
/// may be in the message for another reason (the message's own words, a
/// name quoted): what counts is whether it is there because of the secret,
/// so the file is parsed again with that line's secret blanked out.
fn file_refusal_holds_no_secret(text: &str, parse: fn(&str) -> Result<usize, String>) {
    let Err(message) = parse(text) else {
        return;
    };
    assert!(message.contains("line "), "{message}");
    for (n, secret) in secrets(text) {
        if message.contains(secret) {
            let again = parse(&blanked(text, n)).err().unwrap_or_default();
            assert!(again.contains(secret), "{message} quotes {secret}");
        }
    }
}

pub fn check(data: &[u8]) {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(input);
    match selector % 6 {
        0 => file_refusal_holds_no_secret(&text, fuzzing::htpasswd),
        1 => file_refusal_holds_no_secret(&text, fuzzing::api_keys),
        2 => {
            if let Some((user, password)) = fuzzing::basic_credentials(input) {
                assert!(!user.contains(':'));
                let value = std::str::from_utf8(input).unwrap().trim();
                let encoded = value.split_once(' ').unwrap().1.trim();
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap();
                let mut expected = user.into_bytes();
                expected.push(b':');
                expected.extend_from_slice(&password);
                assert_eq!(decoded, expected);
            }
        }
        3 => {
            if let Some((false, status)) = fuzzing::check_response(input) {
                assert!((400..600).contains(&status), "a denial with {status}");
            }
        }
        4 => {
            assert!(
                !fuzzing::opens_as_session(7, &text),
                "a forged cookie opened"
            );
            let sealed = fuzzing::seal_session(7, input);
            assert!(fuzzing::opens_as_session(7, &sealed));
            assert!(
                !fuzzing::opens_as_session(8, &sealed),
                "another key opened it"
            );
            let mut bytes = sealed.into_bytes();
            let at = usize::from(data.len() as u8) % bytes.len();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            assert!(
                !fuzzing::opens_as_session(7, &tampered),
                "a tampered cookie opened"
            );
        }
        _ => {
            let (name, rest) = text.split_once('\n').unwrap_or(("state", &text));
            let cookies: Vec<&[u8]> = rest.lines().map(str::as_bytes).collect();
            let (param, cookie) = fuzzing::oidc_lookups(rest, &cookies, name);
            if let Some(cookie) = cookie {
                assert!(rest.contains(&format!("{name}={cookie}")) || cookie.is_empty());
            }
            drop(param);
        }
    }
}
