//! `Accept-Encoding` (RFC 9110 12.5.3): the codings a client takes, with
//! q-values; the handler's order of preference breaks ties.

use crate::config::Encoding;

/// The coding for a client that sent `fields` (each an `Accept-Encoding`
/// value), from `offered` in order of preference: the one the client
/// weighs highest, the first of `offered` among equals; `None` when it
/// takes none of them (or sent no `Accept-Encoding`: then nothing but
/// the identity is sure to be understood).
pub(crate) fn choose<'a>(
    fields: impl Iterator<Item = &'a [u8]>,
    offered: &[Encoding],
) -> Option<Encoding> {
    // Per offered coding: its own q-value if listed, else `*`'s.
    let mut named: [Option<u16>; 3] = [None; 3];
    let mut any: Option<u16> = None;
    let mut seen = false;
    for field in fields {
        seen = true;
        for member in field.split(|&b| b == b',') {
            let Some((coding, q)) = member_of(member) else {
                continue;
            };
            let slot = |e: Encoding| match e {
                Encoding::Gzip => 0,
                Encoding::Br => 1,
                Encoding::Zstd => 2,
            };
            let coding = coding.to_ascii_lowercase();
            let target = match coding.as_slice() {
                b"gzip" | b"x-gzip" => Some(slot(Encoding::Gzip)),
                b"br" => Some(slot(Encoding::Br)),
                b"zstd" => Some(slot(Encoding::Zstd)),
                b"*" => {
                    any = Some(any.map_or(q, |old: u16| old.max(q)));
                    None
                }
                _ => None,
            };
            if let Some(index) = target {
                named[index] = Some(named[index].map_or(q, |old| old.max(q)));
            }
        }
    }
    if !seen {
        return None;
    }
    let weight = |e: Encoding| {
        let index = match e {
            Encoding::Gzip => 0,
            Encoding::Br => 1,
            Encoding::Zstd => 2,
        };
        named[index].or(any).unwrap_or(0)
    };
    let mut best: Option<(Encoding, u16)> = None;
    for &encoding in offered {
        let q = weight(encoding);
        if q > 0 && best.is_none_or(|(_, top)| q > top) {
            best = Some((encoding, q));
        }
    }
    best.map(|(encoding, _)| encoding)
}

/// One list member: its coding and q-value in thousandths; `None` for an
/// empty or malformed member (skipped, as the RFC's grammar would not
/// accept it either).
fn member_of(member: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = member.split(|&b| b == b';');
    let coding = trim(parts.next()?);
    if coding.is_empty()
        || !coding
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return None;
    }
    let mut q = 1000;
    for parameter in parts {
        let parameter = trim(parameter);
        let Some(value) = parameter
            .strip_prefix(b"q=")
            .or_else(|| parameter.strip_prefix(b"Q="))
        else {
            continue;
        };
        q = qvalue(value)?;
    }
    Some((coding, q))
}

/// `0`, `0.5`, `1.000`: thousandths (RFC 9110 12.4.2); `None` otherwise.
fn qvalue(text: &[u8]) -> Option<u16> {
    let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &b""[..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + fraction.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match whole {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn trim(bytes: &[u8]) -> &[u8] {
    http1::request::trim(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    fn pick(value: &str, offered: &[Encoding]) -> Option<Encoding> {
        choose(std::iter::once(value.as_bytes()), offered)
    }

    #[test]
    fn the_highest_q_wins_and_the_preference_breaks_ties() {
        let all = [Zstd, Br, Gzip];
        assert_eq!(pick("gzip, deflate, br, zstd", &all), Some(Zstd));
        assert_eq!(
            pick("gzip, deflate, br, zstd", &[Gzip, Br, Zstd]),
            Some(Gzip)
        );
        assert_eq!(pick("gzip;q=1.0, br;q=0.9", &all), Some(Gzip));
        assert_eq!(pick("br;q=0.5, gzip;q=0.8, zstd;q=0.2", &all), Some(Gzip));
        assert_eq!(pick("GZIP", &all), Some(Gzip));
        assert_eq!(pick("x-gzip", &all), Some(Gzip));
        assert_eq!(pick("br ; q=1 , gzip", &all), Some(Br));
    }

    #[test]
    fn zero_excludes_and_star_stands_for_the_rest() {
        let all = [Zstd, Br, Gzip];
        assert_eq!(pick("zstd;q=0, br;q=0, gzip;q=0", &all), None);
        assert_eq!(pick("*", &all), Some(Zstd));
        assert_eq!(pick("*;q=0.5, zstd;q=0", &all), Some(Br));
        assert_eq!(pick("identity", &all), None);
        assert_eq!(pick("", &all), None);
        assert_eq!(pick("deflate", &all), None);
        assert_eq!(pick("gzip", &[Br]), None);
        // No field at all: identity only.
        assert_eq!(choose(std::iter::empty(), &all), None);
    }

    #[test]
    fn malformed_members_are_skipped() {
        let all = [Zstd, Br, Gzip];
        assert_eq!(pick("zstd;q=2, gzip", &all), Some(Gzip));
        assert_eq!(
            pick("zstd;q=0.1234, br;q=abc, gzip;q=0.001", &all),
            Some(Gzip)
        );
        assert_eq!(pick("zs td, gzip", &all), Some(Gzip));
        assert_eq!(pick(",,, ;q=1, br", &all), Some(Br));
        // Several fields are one list.
        assert_eq!(
            choose(["gzip;q=0.5".as_bytes(), b"br"].into_iter(), &all),
            Some(Br)
        );
    }
}
