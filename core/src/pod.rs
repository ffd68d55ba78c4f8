//! The pod the injectors edit: [`WorkingSet`], the borrowed view of the
//! request ([`crate::view`]) edited in place, typed, with the name-keyed
//! "ensure" helpers every injector uses. Reads are typed and every write
//! records, at the moment it decides, the RFC 6902 operation that makes the
//! same change on the full pod. Nothing is built from the fields the
//! injectors only read: turning the view into a JSON tree only to drop it
//! again was a large part of the review's cost (see `docs/performance.md`,
//! measured by `cargo bench --bench review`).
//!
//! The kinds of operations recorded: `add` of a map key or of a list entry
//! at its explicit index, `replace` of a value that differs, and a missing
//! (or null) list or map created whole with one `add`. Operations apply in
//! order, so an edit inside something added earlier is valid. The test
//! oracle (the `kserve-injector-oracle` crate, beside the tests) is a second
//! editor of the whole pod as a JSON tree, held to the same results on every
//! call the injectors can make.

pub(crate) use crate::pod_facts::Annotations;

/// `spec.containers` or `spec.initContainers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Containers,
    InitContainers,
}

impl List {
    pub(crate) fn key(self) -> &'static str {
        match self {
            List::Containers => "containers",
            List::InitContainers => "initContainers",
        }
    }
}

/// A token of a path: a map key (escaped as RFC 6901 says) or a list index.
pub(crate) enum PathStep<'s> {
    Key(&'s str),
    Index(usize),
}

impl<'s> From<&'s str> for PathStep<'s> {
    fn from(key: &'s str) -> Self {
        PathStep::Key(key)
    }
}

impl From<usize> for PathStep<'_> {
    fn from(index: usize) -> Self {
        PathStep::Index(index)
    }
}

/// `path` (pointer text) with `steps` appended, as RFC 6901 text: keys
/// with `~` or `/` escaped. Text rather than jsonptr's `PointerBuf`: its
/// `push_back` allocates a token per step and its `parse` scans again what
/// is valid by construction, both on every recorded operation, which a
/// small review notices (`examples/review_loop.rs` counts it).
pub(crate) fn child<'s, const N: usize>(path: &str, steps: [PathStep<'s>; N]) -> String {
    let room = |step: &PathStep| match step {
        PathStep::Key(key) => key.len() + 4,
        PathStep::Index(_) => 21,
    };
    let mut text = String::with_capacity(path.len() + steps.iter().map(room).sum::<usize>());
    text.push_str(path);
    for step in steps {
        text.push('/');
        match step {
            PathStep::Key(key) => push_token(&mut text, key),
            PathStep::Index(index) => text.push_str(itoa::Buffer::new().format(index)),
        }
    }
    text
}

/// Appends `key` as an RFC 6901 token (`~` as `~0`, `/` as `~1`). By hand:
/// jsonptr's `Token` builds an owned copy of every key with either, and
/// annotation keys all have a `/`; memchr finds them several bytes at a time,
/// where a byte-wise scan of every key showed in a small review's profile.
fn push_token(text: &mut String, key: &str) {
    let bytes = key.as_bytes();
    // Below a word or two, memchr's setup costs more than looking at each byte.
    if bytes.len() < 16 && !bytes.iter().any(|&b| b == b'~' || b == b'/') {
        text.push_str(key);
        return;
    }
    let mut start = 0;
    while let Some(at) = memchr::memchr2(b'~', b'/', &bytes[start..]) {
        let i = start + at;
        // Both bytes are ASCII, so `start..i` lies on char boundaries.
        text.push_str(&key[start..i]);
        text.push_str(if bytes[i] == b'~' { "~0" } else { "~1" });
        start = i + 1;
    }
    text.push_str(&key[start..]);
}

pub(crate) mod build;
mod container;
mod edits;
pub(crate) mod recorded;
mod working;

#[cfg(feature = "oracle")]
pub use container::TypedContainer;
pub use recorded::{apply_all, ApplyError, Op, OpKind};
pub use working::WorkingSet;

#[cfg(test)]
mod tests;
