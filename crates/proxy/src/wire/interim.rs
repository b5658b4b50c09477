//! Interim (1xx) answers from an upstream, the one rule for every
//! client/upstream protocol pair (RFC 9110 15.2, RFC 9113 8.1).
//!
//! Any 1xx but `101` is interim: the final answer is still to come on the
//! same request, so taking a `102` or `103` as the answer would leave the
//! real one on the upstream connection, to be read as the answer to the
//! *next* request (a pooled connection then hands one client another
//! client's response). `100 Continue` is the proxy's own business: it
//! answers a client's `Expect` itself, so the upstream's is dropped. The
//! others (`102 Processing`, `103 Early Hints`, unknown ones) go on to
//! the client, unless it speaks HTTP/1.0, which has no interim answers.
//! A flood of them is bounded: past [`MAX_INTERIM`] the exchange fails
//! (502) and the upstream connection is not kept.

use http::StatusCode;

use super::{fields::Fields, head};

/// Interim answers one request may get before its final one: more is a
/// misbehaving (or hostile) upstream.
pub(crate) const MAX_INTERIM: u32 = 16;

/// The client's protocol, as far as interim answers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientVersion {
    Http10,
    Http11,
    Http2,
}

/// What to do with one response head from the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interim {
    /// The final answer (any status from 200, and `101`).
    Final,
    /// An interim answer the client does not get; read on.
    Drop,
    /// An interim answer for the client; read on.
    Forward,
}

/// More interim answers than [`MAX_INTERIM`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooMany;

impl TooMany {
    pub(crate) const DETAIL: &'static str = "the upstream sent too many interim (1xx) answers";
}

/// Whether a head with `status` is an interim answer: every `1xx` but `101`.
#[inline]
pub(crate) fn is_interim(status: StatusCode) -> bool {
    status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS
}

/// Counts one request's interim answers and says what each one is for
/// its client.
#[derive(Debug)]
pub(crate) struct InterimAnswers {
    seen: u32,
    client: ClientVersion,
}

impl InterimAnswers {
    /// None seen yet, for a client speaking `client`.
    pub(crate) fn new(client: ClientVersion) -> Self {
        Self { seen: 0, client }
    }

    /// What a head with `status` is for the client.
    pub(crate) fn classify(&mut self, status: StatusCode) -> Result<Interim, TooMany> {
        if !is_interim(status) {
            return Ok(Interim::Final);
        }
        self.seen += 1;
        if self.seen > MAX_INTERIM {
            return Err(TooMany);
        }
        Ok(match (status, self.client) {
            (StatusCode::CONTINUE, _) | (_, ClientVersion::Http10) => Interim::Drop,
            _ => Interim::Forward,
        })
    }
}

/// Appends an interim answer for an HTTP/1.1 client: its status line and
/// the upstream's fields under the response rules (no hop-by-hop field,
/// no framing: a 1xx has no body), and no middleware edits, which belong
/// to the final answer.
pub(crate) fn interim_head(out: &mut Vec<u8>, status: StatusCode, fields: Fields<'_>) {
    http1::response::status_line(out, status);
    // The rules without edits (not `head::response_fields`, whose one
    // caller on the hot path keeps it inlined).
    let rules = head::ResponseRules::new(status, fields, false, None);
    fields.for_each(|name, value| {
        if rules.keeps(name) {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    });
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClientVersion::{Http10, Http11, Http2};

    #[test]
    fn every_1xx_but_101_is_interim() {
        // (status, client, what it is)
        let table = [
            (200, Http11, Interim::Final),
            (204, Http2, Interim::Final),
            (101, Http11, Interim::Final),
            (100, Http11, Interim::Drop),
            (100, Http2, Interim::Drop),
            (102, Http11, Interim::Forward),
            (103, Http11, Interim::Forward),
            (103, Http2, Interim::Forward),
            (199, Http2, Interim::Forward),
            (103, Http10, Interim::Drop),
            (102, Http10, Interim::Drop),
        ];
        for (status, client, expected) in table {
            let status = StatusCode::from_u16(status).unwrap();
            let got = InterimAnswers::new(client).classify(status);
            assert_eq!(got, Ok(expected), "{status} to {client:?}");
        }
    }

    #[test]
    fn a_flood_of_interim_answers_is_refused_past_the_bound() {
        let mut answers = InterimAnswers::new(Http11);
        for n in 1..=MAX_INTERIM {
            let status = if n % 2 == 0 { 100 } else { 103 };
            let status = StatusCode::from_u16(status).unwrap();
            assert!(answers.classify(status).is_ok(), "answer {n}");
        }
        assert_eq!(answers.classify(StatusCode::PROCESSING), Err(TooMany));
        // Final answers are never counted against the bound.
        let mut answers = InterimAnswers::new(Http11);
        for _ in 0..100 {
            assert_eq!(answers.classify(StatusCode::OK), Ok(Interim::Final));
        }
    }

    #[test]
    fn an_interim_head_has_no_framing_and_no_hop_by_hop_field() {
        let mut map = http::HeaderMap::new();
        map.insert("link", "</style.css>; rel=preload".parse().unwrap());
        map.insert("connection", "x-hop".parse().unwrap());
        map.insert("x-hop", "1".parse().unwrap());
        map.insert("content-length", "5".parse().unwrap());
        map.insert("transfer-encoding", "chunked".parse().unwrap());
        let mut out = Vec::new();
        interim_head(&mut out, StatusCode::EARLY_HINTS, Fields::Map(&map));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
        );
    }
}
