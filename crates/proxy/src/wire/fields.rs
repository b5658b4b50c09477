//! A message's header fields, whichever protocol carried them: ranges
//! into the bytes an HTTP/1.1 parser read, or the map the HTTP/2 codec
//! decoded. Nothing is copied to look at them the same way.

use std::ops::Range;

use http::HeaderMap;

/// The header fields of one request or response head.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields<'a> {
    /// HTTP/1.x: `(name, value)` ranges into `buf`, in the order sent.
    H1 {
        buf: &'a [u8],
        fields: &'a [(Range<usize>, Range<usize>)],
    },
    /// HTTP/2: names are lower case; the order within a name is kept.
    Map(&'a HeaderMap),
}

impl<'a> Fields<'a> {
    /// Every field, in order.
    pub(crate) fn iter(&self) -> FieldIter<'a> {
        match *self {
            Self::H1 { buf, fields } => FieldIter::H1 {
                buf,
                fields: fields.iter(),
            },
            Self::Map(map) => FieldIter::Map(map.iter()),
        }
    }

    /// Calls `visit` with every field, in order. The hot loops (building a
    /// head, gathering `Connection` tokens) use this rather than
    /// [`Self::iter`]: one match on the form, then a plain loop, where the
    /// iterator matches again on every field.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&'a [u8], &'a [u8])) {
        match *self {
            Self::H1 { buf, fields } => {
                for (name, value) in fields {
                    visit(&buf[name.clone()], &buf[value.clone()]);
                }
            }
            Self::Map(map) => {
                for (name, value) in map {
                    visit(name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }
    }

    /// The first value of the field called `name` (any case).
    pub(crate) fn get(&self, name: &str) -> Option<&'a [u8]> {
        match *self {
            Self::Map(map) => map.get(name).map(http::HeaderValue::as_bytes),
            // A plain loop over the ranges that compares lengths before
            // bytes: most names are ruled out without slicing the buffer
            // (a per-request lookup, `traceparent`, when tracing is on).
            Self::H1 { buf, fields } => fields
                .iter()
                .find(|(n, _)| {
                    n.len() == name.len() && buf[n.clone()].eq_ignore_ascii_case(name.as_bytes())
                })
                .map(|(_, v)| &buf[v.clone()]),
        }
    }

    /// Every value of the field called `name` (any case), in order.
    pub(crate) fn get_all(&self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Self::H1 { fields, .. } => fields.len(),
            Self::Map(map) => map.len(),
        }
    }
}

/// The fields of a [`Fields`], as `(name, value)` bytes.
#[derive(Debug)]
pub(crate) enum FieldIter<'a> {
    H1 {
        buf: &'a [u8],
        fields: std::slice::Iter<'a, (Range<usize>, Range<usize>)>,
    },
    Map(http::header::Iter<'a, http::HeaderValue>),
}

impl<'a> Iterator for FieldIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::H1 { buf, fields } => fields
                .next()
                .map(|(n, v)| (&buf[n.clone()], &buf[v.clone()])),
            Self::Map(iter) => iter
                .next()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_read_alike() {
        let raw = b"Host: a\r\nX-Id: 1\r\nx-id: 2\r\n";
        let ranges = [(0..4, 6..7), (9..13, 15..16), (18..22, 24..25)];
        let h1 = Fields::H1 {
            buf: raw,
            fields: &ranges,
        };
        let mut map = HeaderMap::new();
        map.insert("host", "a".parse().unwrap());
        map.append("x-id", "1".parse().unwrap());
        map.append("x-id", "2".parse().unwrap());
        let h2 = Fields::Map(&map);
        for fields in [h1, h2] {
            assert_eq!(fields.get("X-ID"), Some(&b"1"[..]));
            assert_eq!(fields.get_all("x-id").collect::<Vec<_>>(), [b"1", b"2"]);
            assert_eq!(fields.len(), 3);
            assert_eq!(fields.get("missing"), None);
        }
    }
}
