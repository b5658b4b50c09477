//! The precompiled path-template matcher: a trie of path segments where a
//! literal segment beats a partly templated one (`/report.{format}`), which
//! beats a wholly templated one (`{id}`), with backtracking, so
//! `/pets/mine` wins over `/pets/{id}` as OpenAPI asks. A template
//! expression matches one non-empty segment (or a non-empty part of one);
//! literals compare with the percent-decoded request segment; `.` and `..`
//! segments match nothing.

use crate::text::percent_decode;

/// Path parameters a template may have.
pub(crate) const MAX_CAPTURES: usize = 16;

/// Byte ranges of the captured path parameters, in template order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Captures {
    pub(crate) ranges: [(u32, u32); MAX_CAPTURES],
    pub(crate) len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(Box<[u8]>),
    Var,
}

#[derive(Debug, Default)]
struct Node {
    /// Sorted by key.
    literals: Vec<(Box<[u8]>, Node)>,
    mixed: Vec<(Box<[Piece]>, Node)>,
    param: Option<Box<Node>>,
    route: Option<usize>,
}

/// A path-template matcher.
#[derive(Debug, Default)]
pub(crate) struct Router {
    root: Node,
}

/// A parsed template: the names of its expressions, in order.
pub(crate) struct Template {
    segments: Vec<Vec<Piece>>,
    pub(crate) names: Vec<String>,
}

/// Parses `/v1/pets/{petId}`.
pub(crate) fn parse_template(template: &str) -> Result<Template, String> {
    let Some(rest) = template.strip_prefix('/') else {
        return Err("a path must start with `/`".to_owned());
    };
    let mut segments = Vec::new();
    let mut names = Vec::new();
    for segment in rest.split('/') {
        let mut pieces = Vec::new();
        let mut text = segment;
        while !text.is_empty() {
            match text.find('{') {
                Some(0) => {
                    let close = text
                        .find('}')
                        .ok_or_else(|| format!("unclosed `{{` in segment `{segment}`"))?;
                    let name = &text[1..close];
                    if name.is_empty() || name.contains('{') {
                        return Err(format!("bad template expression in segment `{segment}`"));
                    }
                    if pieces.last() == Some(&Piece::Var) {
                        return Err(format!(
                            "adjacent template expressions in segment `{segment}`"
                        ));
                    }
                    if names.iter().any(|n| n == name) {
                        return Err(format!("`{{{name}}}` appears twice"));
                    }
                    names.push(name.to_owned());
                    pieces.push(Piece::Var);
                    text = &text[close + 1..];
                }
                found => {
                    let end = found.unwrap_or(text.len());
                    if text[..end].contains('}') {
                        return Err(format!("stray `}}` in segment `{segment}`"));
                    }
                    pieces.push(Piece::Lit(text.as_bytes()[..end].into()));
                    text = &text[end..];
                }
            }
        }
        if pieces.is_empty() {
            pieces.push(Piece::Lit(Box::default()));
        }
        segments.push(pieces);
    }
    if names.len() > MAX_CAPTURES {
        return Err(format!("more than {MAX_CAPTURES} path parameters"));
    }
    Ok(Template { segments, names })
}

impl Router {
    /// Adds a template for `route`; `Err(other_route)` when an equivalent
    /// template (same shape, maybe other names) is already there.
    pub(crate) fn insert(&mut self, template: &Template, route: usize) -> Result<(), usize> {
        let mut node = &mut self.root;
        for pieces in &template.segments {
            node = match pieces.as_slice() {
                [Piece::Var] => node.param.get_or_insert_with(Box::default),
                [Piece::Lit(literal)] => {
                    let at = match node
                        .literals
                        .binary_search_by(|(k, _)| k.as_ref().cmp(literal))
                    {
                        Ok(at) => at,
                        Err(at) => {
                            node.literals.insert(at, (literal.clone(), Node::default()));
                            at
                        }
                    };
                    &mut node.literals[at].1
                }
                pieces => {
                    let at = match node.mixed.iter().position(|(k, _)| k.as_ref() == pieces) {
                        Some(at) => at,
                        None => {
                            node.mixed.push((pieces.into(), Node::default()));
                            node.mixed.len() - 1
                        }
                    };
                    &mut node.mixed[at].1
                }
            };
        }
        match node.route {
            Some(existing) => Err(existing),
            None => {
                node.route = Some(route);
                Ok(())
            }
        }
    }

    /// Matches a raw (undecoded) path starting with `/`.
    pub(crate) fn find(&self, path: &[u8]) -> Option<(usize, Captures)> {
        let rest = path.strip_prefix(b"/")?;
        let mut captures = Captures {
            ranges: [(0, 0); MAX_CAPTURES],
            len: 0,
        };
        let route = find_in(&self.root, rest, 1, &mut captures)?;
        Some((route, captures))
    }
}

fn find_in(node: &Node, rest: &[u8], offset: usize, captures: &mut Captures) -> Option<usize> {
    let (segment, next) = match rest.iter().position(|&b| b == b'/') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let descend = |child: &Node, captures: &mut Captures| match next {
        None => child.route,
        Some(next) => find_in(child, next, offset + segment.len() + 1, captures),
    };
    let decoded = percent_decode(segment, false);
    let decoded: &[u8] = match &decoded {
        Ok(d) => d,
        Err(()) => segment,
    };
    if decoded == b"." || decoded == b".." {
        return None;
    }
    if let Ok(at) = node
        .literals
        .binary_search_by(|(k, _)| k.as_ref().cmp(decoded))
    {
        if let Some(route) = descend(&node.literals[at].1, captures) {
            return Some(route);
        }
    }
    let saved = captures.len;
    for (pieces, child) in &node.mixed {
        if match_pieces(pieces, segment, offset, captures) {
            if let Some(route) = descend(child, captures) {
                return Some(route);
            }
        }
        captures.len = saved;
    }
    if let Some(child) = &node.param {
        if !segment.is_empty() && captures.len < MAX_CAPTURES {
            captures.ranges[captures.len] = range(offset, offset + segment.len());
            captures.len += 1;
            if let Some(route) = descend(child, captures) {
                return Some(route);
            }
            captures.len = saved;
        }
    }
    None
}

fn range(start: usize, end: usize) -> (u32, u32) {
    (
        u32::try_from(start).unwrap_or(u32::MAX),
        u32::try_from(end).unwrap_or(u32::MAX),
    )
}

/// Matches a partly templated segment against the raw segment, from the
/// right: each expression takes the shortest non-empty run after the
/// literal before it, so the first one is greedy (`{name}.{format}` on
/// `a.b.csv` gives `a.b` and `csv`).
fn match_pieces(pieces: &[Piece], segment: &[u8], offset: usize, captures: &mut Captures) -> bool {
    let vars = pieces.iter().filter(|p| **p == Piece::Var).count();
    if captures.len + vars > MAX_CAPTURES {
        return false;
    }
    let mut slot = captures.len + vars;
    let mut end = segment.len();
    for (i, piece) in pieces.iter().enumerate().rev() {
        match piece {
            Piece::Lit(literal) => {
                if !segment[..end].ends_with(literal) {
                    return false;
                }
                end -= literal.len();
            }
            Piece::Var => {
                let start = match i.checked_sub(1).map(|before| &pieces[before]) {
                    // After a leading literal: everything up to it.
                    Some(Piece::Lit(before)) if i == 1 => before.len(),
                    Some(Piece::Lit(before)) => {
                        if end == 0 {
                            return false;
                        }
                        match rfind_bytes(&segment[..end - 1], before) {
                            Some(at) => at + before.len(),
                            None => return false,
                        }
                    }
                    _ => 0,
                };
                if start >= end {
                    return false;
                }
                slot -= 1;
                captures.ranges[slot] = range(offset + start, offset + end);
                end = start;
            }
        }
    }
    if end != 0 {
        return false;
    }
    captures.len += vars;
    true
}

fn rfind_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(haystack.len());
    }
    haystack.windows(needle.len()).rposition(|w| w == needle)
}
