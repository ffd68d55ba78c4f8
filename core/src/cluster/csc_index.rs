//! The ClusterStorageContainers of a snapshot, shared and indexed by what
//! their `supportedUriFormats` can match, so that selecting one for a URI
//! reads only the few that can match it, whatever the cluster holds.
//!
//! KServe's `GetStorageContainerSpec` (pkg/webhook/admission/pod/
//! storage_initializer_injector.go, v0.15.0 to v0.20.0) lists every CSC and
//! takes the first, in the list's (name) order, that is not disabled, has
//! workload type `initContainer` and whose `IsStorageUriSupported` is true.
//! [`StorageContainers::candidates`] yields, in name order, a superset of
//! the eligible CSCs for which that check can be true or can fail; every CSC
//! it leaves out would have answered "not supported" without an error, so
//! taking the first match among the candidates is KServe's choice:
//!
//! - a `prefix` format is a key of the prefix map: the URI's own prefixes
//!   are looked up (one lookup per distinct prefix length held);
//! - a `regex` format anchored at the start (`^…`, as regex-syntax sees it)
//!   whose every match begins with one of a finite set of literals goes
//!   into the prefix map under each literal;
//! - an unanchored `regex` whose matches begin with one of a finite set of
//!   literals can only match a URI that contains one of them: the literals
//!   go into one Aho-Corasick automaton, searched once per URI;
//! - any other regex (no literal every match starts with), and a regex that
//!   does not compile (KServe's error is reached only by evaluating it), is
//!   a candidate for every URI;
//! - a format with neither field never matches and is not indexed.
//!
//! The index is built once per set of CSCs, on first use after a change,
//! and shared (`Arc`) by every snapshot handed out until the next change.

use super::objects::{ClusterStorageContainer, UriFormat, INIT_CONTAINER_WORKLOAD};
use aho_corasick::AhoCorasick;
use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::Look;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

/// ClusterStorageContainers by name; cloning shares them (an `Arc`).
#[derive(Clone, Default)]
pub struct StorageContainers {
    shared: Arc<Held>,
}

#[derive(Default)]
struct Held {
    /// Keyed by the name each holds (shared, not copied).
    by_name: BTreeMap<Arc<str>, Arc<ClusterStorageContainer>>,
    /// Built on first use, dropped by any change.
    index: OnceLock<Index>,
}

impl Clone for Held {
    fn clone(&self) -> Self {
        Self {
            by_name: self.by_name.clone(),
            index: OnceLock::new(),
        }
    }
}

/// Positions are indices into the name-ordered list of CSCs.
#[derive(Default)]
struct Index {
    ordered: Vec<Arc<ClusterStorageContainer>>,
    /// A prefix (or an anchored regex's literal) → the CSCs that hold it.
    prefixes: HashMap<Box<str>, Vec<u32>>,
    /// The distinct lengths of the keys of `prefixes`, ascending.
    prefix_lengths: Vec<usize>,
    /// Unanchored regexes' literals, and per literal the CSCs.
    contained: Option<(AhoCorasick, Vec<Vec<u32>>)>,
    /// Candidates for every URI.
    always: Vec<u32>,
}

impl StorageContainers {
    pub(crate) fn get(&self, name: &str) -> Option<&ClusterStorageContainer> {
        self.shared.by_name.get(name).map(|c| &**c)
    }

    /// Adds or replaces one; returns whether the name was held before.
    pub(crate) fn insert(&mut self, csc: ClusterStorageContainer) -> bool {
        let held = Arc::make_mut(&mut self.shared);
        held.index = OnceLock::new();
        held.by_name
            .insert(csc.name.clone(), Arc::new(csc))
            .is_some()
    }

    #[cfg(test)]
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let held = Arc::make_mut(&mut self.shared);
        held.index = OnceLock::new();
        held.by_name.remove(name).is_some()
    }

    pub fn len(&self) -> usize {
        self.shared.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shared.by_name.is_empty()
    }

    /// Every CSC, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &ClusterStorageContainer> {
        self.shared.by_name.values().map(|c| &**c)
    }

    /// Whether `other` is the same shared set (not a copy).
    pub fn shares(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The CSCs an implicit selection for `uri` must look at, in name
    /// order: every eligible CSC (enabled, `initContainer`) whose formats
    /// can match `uri` or fail on it. See the module comment.
    pub(crate) fn candidates<'a>(
        &'a self,
        uri: &str,
    ) -> impl Iterator<Item = &'a ClusterStorageContainer> + 'a {
        let index = self.shared.index.get_or_init(|| Index::build(&self.shared));
        let mut found = index.always.clone();
        for &len in &index.prefix_lengths {
            let Some(prefix) = uri.get(..len) else {
                if len > uri.len() {
                    break;
                }
                continue;
            };
            if let Some(holders) = index.prefixes.get(prefix) {
                found.extend_from_slice(holders);
            }
        }
        if let Some((automaton, holders)) = &index.contained {
            for m in automaton.find_overlapping_iter(uri) {
                found.extend_from_slice(&holders[m.pattern().as_usize()]);
            }
        }
        found.sort_unstable();
        found.dedup();
        found.into_iter().map(|i| &*index.ordered[i as usize])
    }
}

impl Index {
    fn build(held: &Held) -> Self {
        let mut index = Index {
            ordered: held.by_name.values().cloned().collect(),
            ..Index::default()
        };
        let mut contained: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
        for (i, csc) in index.ordered.iter().enumerate() {
            let i = i as u32;
            if csc.disabled || csc.workload_type() != INIT_CONTAINER_WORKLOAD {
                continue;
            }
            for format in &csc.supported_uri_formats {
                match format {
                    UriFormat::Prefix(p) => index.prefixes.entry(p.clone()).or_default().push(i),
                    UriFormat::Regex(regex) if regex.compiled.is_ok() => {
                        match literals(&regex.source) {
                            Some((true, lits)) => {
                                for lit in lits {
                                    match String::from_utf8(lit) {
                                        Ok(p) => {
                                            index.prefixes.entry(p.into()).or_default().push(i)
                                        }
                                        // A literal ending inside a character: no
                                        // URI prefix equals it, but a longer one
                                        // may start with its bytes.
                                        Err(e) => {
                                            contained.entry(e.into_bytes()).or_default().push(i)
                                        }
                                    }
                                }
                            }
                            Some((false, lits)) => {
                                for lit in lits {
                                    contained.entry(lit).or_default().push(i);
                                }
                            }
                            None => index.always.push(i),
                        }
                    }
                    UriFormat::Regex(_) => index.always.push(i),
                    UriFormat::Empty => {}
                }
            }
        }
        let mut lengths: Vec<usize> = index.prefixes.keys().map(|k| k.len()).collect();
        lengths.sort_unstable();
        lengths.dedup();
        index.prefix_lengths = lengths;
        if !contained.is_empty() {
            let (patterns, holders): (Vec<Vec<u8>>, Vec<Vec<u32>>) = contained.into_iter().unzip();
            match AhoCorasick::new(&patterns) {
                Ok(automaton) => index.contained = Some((automaton, holders)),
                // Not expected for a few thousand short literals; then they
                // are simply evaluated for every URI.
                Err(_) => index.always.extend(holders.into_iter().flatten()),
            }
        }
        index.always.sort_unstable();
        index.always.dedup();
        index
    }
}

/// The literals every match of `regex` starts with, and whether a match
/// must start at the beginning of the text; `None` when there is no such
/// finite set (or one of them is empty, which constrains nothing).
fn literals(regex: &str) -> Option<(bool, Vec<Vec<u8>>)> {
    // The same parser and default flags `regex::Regex::new` uses.
    let hir = regex_syntax::Parser::new().parse(regex).ok()?;
    let anchored = hir.properties().look_set_prefix().contains(Look::Start);
    let seq = Extractor::new().extract(&hir);
    let lits = seq.literals()?;
    if lits.is_empty() || lits.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    Some((
        anchored,
        lits.iter().map(|l| l.as_bytes().to_vec()).collect(),
    ))
}

impl FromIterator<ClusterStorageContainer> for StorageContainers {
    fn from_iter<I: IntoIterator<Item = ClusterStorageContainer>>(iter: I) -> Self {
        let by_name = iter
            .into_iter()
            .map(|c| (c.name.clone(), Arc::new(c)))
            .collect();
        Self {
            shared: Arc::new(Held {
                by_name,
                index: OnceLock::new(),
            }),
        }
    }
}

impl FromIterator<Arc<ClusterStorageContainer>> for StorageContainers {
    fn from_iter<I: IntoIterator<Item = Arc<ClusterStorageContainer>>>(iter: I) -> Self {
        let by_name = iter.into_iter().map(|c| (c.name.clone(), c)).collect();
        Self {
            shared: Arc::new(Held {
                by_name,
                index: OnceLock::new(),
            }),
        }
    }
}

impl PartialEq for StorageContainers {
    fn eq(&self, other: &Self) -> bool {
        self.shares(other) || self.shared.by_name == other.shared.by_name
    }
}

impl std::fmt::Debug for StorageContainers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.shared.by_name.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
