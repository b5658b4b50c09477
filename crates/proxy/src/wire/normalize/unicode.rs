//! What a path's escapes mean as text: they must decode to UTF-8
//! ([`Utf8`]), and a few non-ASCII letters are the same letter as an
//! ASCII one to backends that compare paths without case ([`fold_case`]).

/// Checks, one decoded byte at a time, that a path's bytes form UTF-8 as
/// RFC 3629 defines it: no overlong forms (`%C0%AE` is `.` and `%C0%AF` is
/// `/` to the legacy decoders that accept them, `%C0%80` is NUL), no
/// surrogates, nothing past U+10FFFF, no stray continuation bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Utf8 {
    /// Continuation bytes still to come.
    left: u8,
    /// The range the next continuation byte must fall in (narrower than
    /// `80..=BF` right after E0, ED, F0 and F4).
    low: u8,
    high: u8,
}

impl Default for Utf8 {
    fn default() -> Self {
        Self {
            left: 0,
            low: 0x80,
            high: 0xBF,
        }
    }
}

impl Utf8 {
    /// Takes the next byte; false if the bytes so far cannot be UTF-8.
    pub(crate) fn push(&mut self, b: u8) -> bool {
        if self.left > 0 {
            if !(self.low..=self.high).contains(&b) {
                return false;
            }
            *self = Self {
                left: self.left - 1,
                ..Self::default()
            };
            return true;
        }
        let (left, low, high) = match b {
            0x00..=0x7F => return true,
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            // Continuation bytes without a lead; C0, C1 and F5.. never occur.
            _ => return false,
        };
        *self = Self { left, low, high };
        true
    }

    /// A character has begun and not ended.
    pub(crate) fn pending(&self) -> bool {
        self.left > 0
    }
}

/// Characters whose case mapping is ASCII, as escapes in normal form
/// (upper-case hex), and the ASCII letters they fold to. A backend that
/// compares paths without case in Java (`equalsIgnoreCase`, Spring's
/// case-insensitive `PathPattern`), .NET (`OrdinalIgnoreCase`: `ı` and
/// `ſ` only) or with full Unicode case folding (Python's `casefold`, ICU)
/// serves `/adm%C4%B1n` (dotless ı, upper-case `I`) or `/%E2%84%AAey`
/// (the Kelvin sign, lower-case `k`) as `/admin` and `/key`.
const FOLDS: [(&str, &str); 13] = [
    ("%C3%9F", "ss"),     // ß, full folding
    ("%C4%B0", "i"),      // İ, simple lower-case
    ("%C4%B1", "i"),      // ı, simple upper-case
    ("%C5%BF", "s"),      // ſ (long s), simple upper-case
    ("%E1%BA%9E", "ss"),  // ẞ, full folding
    ("%E2%84%AA", "k"),   // K (Kelvin sign), simple lower-case
    ("%EF%AC%80", "ff"),  // ﬀ, full folding of the Latin ligatures
    ("%EF%AC%81", "fi"),  // ﬁ
    ("%EF%AC%82", "fl"),  // ﬂ
    ("%EF%AC%83", "ffi"), // ﬃ
    ("%EF%AC%84", "ffl"), // ﬄ
    ("%EF%AC%85", "st"),  // ﬅ
    ("%EF%AC%86", "st"),  // ﬆ
];

/// Whether an escape with this hex can begin an entry of [`FOLDS`]: most
/// escapes (continuation bytes, other letters) are passed over on it.
fn may_fold(hex: &[u8]) -> bool {
    matches!(hex, [b'C', b'3'..=b'5'] | [b'E', b'1' | b'2' | b'F'])
}

/// A normal path with the characters of [`FOLDS`] replaced by the ASCII
/// letters they fold to, for matching routes without case; `None` when
/// it has none of them (nearly always: only paths with escapes of
/// non-ASCII bytes are looked at).
pub(crate) fn fold_case(path: &str) -> Option<String> {
    // A byte loop, not `find('%')`: the searcher's set-up costs more than
    // these short paths take to scan (callgrind).
    let bytes = path.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            at += 1;
            continue;
        }
        let fold = match bytes.get(at + 1..at + 3) {
            Some(lead) if may_fold(lead) => FOLDS
                .iter()
                .find(|(escaped, _)| bytes[at..].starts_with(escaped.as_bytes())),
            _ => None,
        };
        match fold {
            Some((escaped, letters)) => {
                let out = out.get_or_insert_with(|| String::with_capacity(path.len()));
                out.push_str(&path[copied..at]);
                out.push_str(letters);
                copied = at + escaped.len();
                at = copied;
            }
            None => at += 1,
        }
    }
    out.map(|mut out| {
        out.push_str(&path[copied..]);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(bytes: &[u8]) -> bool {
        let mut check = Utf8::default();
        bytes.iter().all(|&b| check.push(b)) && !check.pending()
    }

    #[test]
    fn the_check_agrees_with_std_on_every_short_sequence() {
        let interesting = [
            0x00, 0x2E, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xAE, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
            0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ];
        for &a in &interesting {
            for &b in &interesting {
                for &c in &interesting {
                    for &d in &interesting {
                        let bytes = [a, b, c, d];
                        for len in 1..=4 {
                            let bytes = &bytes[..len];
                            assert_eq!(
                                utf8(bytes),
                                std::str::from_utf8(bytes).is_ok(),
                                "{bytes:02X?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn letters_that_fold_to_ascii_are_folded() {
        assert_eq!(fold_case("/adm%C4%B1n").as_deref(), Some("/admin"));
        assert_eq!(fold_case("/adm%C4%B0n").as_deref(), Some("/admin"));
        assert_eq!(
            fold_case("/%E2%84%AAey/%C5%BFecret").as_deref(),
            Some("/key/secret")
        );
        assert_eq!(fold_case("/pro%EF%AC%81le").as_deref(), Some("/profile"));
        assert_eq!(fold_case("/la%EF%AC%86").as_deref(), Some("/last"));
        assert_eq!(fold_case("/caf%C3%A9"), None);
        assert_eq!(fold_case("/admin"), None);
        // Every folded form is ASCII letters, the fold of the character.
        for (escaped, letters) in FOLDS {
            assert!(may_fold(&escaped.as_bytes()[1..3]), "{escaped}");
            let bytes: Vec<u8> = escaped
                .split('%')
                .skip(1)
                .map(|hex| u8::from_str_radix(hex, 16).unwrap())
                .collect();
            let c = std::str::from_utf8(&bytes).unwrap();
            // Full case folding, near enough: İ folds to `i` and a combining dot.
            let folded: String = c.to_lowercase().to_uppercase().to_lowercase();
            let rest = folded.strip_prefix(letters).unwrap_or("?");
            assert!(
                rest.chars().all(|c| !c.is_ascii()),
                "{escaped}: {c} folds to {folded}"
            );
        }
    }
}
