//! The namespaces of one watch cache's objects, each held once: a cache of
//! 20,000 objects in 400 namespaces holds 400 namespace strings, each
//! object a shared reference to its own. What they hold is charged to
//! the cache (`Cache::bytes`), so the charge stays what the cache holds.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One cache's interned namespaces, and the bytes they hold.
#[derive(Debug, Default)]
pub(super) struct Names {
    held: Mutex<HashSet<Arc<str>>>,
    bytes: AtomicU64,
    /// How many were held after the last prune: the next one waits until
    /// there are twice as many, so pruning costs a fraction of interning.
    pruned_at: AtomicU64,
}

/// What one interned namespace costs: the `Arc`'s counts and text, and its
/// slot in the set (9/4 of a slot, for a table that grew to twice its
/// entries), each allocation rounded to the allocator's 16-byte steps.
fn cost(name: &str) -> u64 {
    let slot = std::mem::size_of::<Arc<str>>() + 1;
    ((16 + name.len()).next_multiple_of(16) + slot * 9 / 4) as u64
}

impl Names {
    /// `name`, shared with every object of the cache that has it.
    pub(super) fn intern(&self, name: &str) -> Arc<str> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(name) = held.get(name) {
            return name.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        held.insert(shared.clone());
        self.bytes.fetch_add(cost(name), Ordering::AcqRel);
        if held.len() as u64 >= 2 * self.pruned_at.load(Ordering::Acquire).max(64) {
            self.prune_held(&mut held);
        }
        shared
    }

    /// Drops the names no object holds any more (a namespace deleted, or
    /// the cache dropped).
    pub(super) fn prune(&self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        self.prune_held(&mut held);
    }

    fn prune_held(&self, held: &mut HashSet<Arc<str>>) {
        held.retain(|name| {
            let used = Arc::strong_count(name) > 1;
            if !used {
                self.bytes.fetch_sub(cost(name), Ordering::AcqRel);
            }
            used
        });
        self.pruned_at.store(held.len() as u64, Ordering::Release);
    }

    /// Bytes the names hold now.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_held_once_and_dropped_when_unused() {
        let names = Names::default();
        let a = names.intern("team-a");
        let again = names.intern("team-a");
        assert!(Arc::ptr_eq(&a, &again));
        let b = names.intern("team-b");
        assert_eq!(names.bytes(), 2 * cost("team-a"));
        drop((a, again));
        names.prune();
        assert_eq!(names.bytes(), cost("team-b"));
        assert_eq!(&*names.intern("team-b"), &*b);
        assert_eq!(names.bytes(), cost("team-b"));
    }

    #[test]
    fn interning_many_names_prunes_the_unused_ones_on_the_way() {
        let names = Names::default();
        for i in 0..1_000 {
            names.intern(&format!("gone-{i}"));
        }
        let held = names.held.lock().unwrap().len();
        assert!(held < 200, "{held}");
        assert_eq!(names.bytes(), held as u64 * cost("gone-000"));
    }
}
