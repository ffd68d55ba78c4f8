//! Fair shares of a connection cap between client addresses, for both
//! listeners. At the cap, with the newcomer counted with its address:
//!
//! - when another address holds more connections than the newcomer's, the
//!   connection closed is of the address holding the most (between equals,
//!   the one holding the youngest connection: a flood's are the newest),
//!   and within it the least productive one (each listener ranks its own);
//! - when the newcomer's address holds at least as many as any other, the
//!   newcomer is refused (closed at once, which costs the server nothing
//!   more): its client holds its share already;
//! - when its address is the only one, it takes the slot of the least
//!   productive of its own (one client alone is served as if no shares
//!   were kept).
//!
//! How productive a connection is, is compared only between connections of
//! one address: many busy connections from one client never push out a
//! connection of another client that holds fewer. So a client whose
//! address holds fewer connections at the cap than every other address
//! (whenever it holds fewer than the cap divided by the number of
//! addresses) never loses one to another client, whatever the others do.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// One open connection as eviction sees it: its client's address, when
/// it was accepted, and its rank among its address's connections (lower
/// ranks are closed first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holder<K> {
    pub addr: IpAddr,
    pub accepted: Instant,
    pub rank: K,
}

/// Of `holders` (the newcomer at `newcomer`, among them), the index of the
/// one to close. `None` when `holders` is empty.
pub(crate) fn victim<K: Ord + Copy>(holders: &[Holder<K>], newcomer: usize) -> Option<usize> {
    let own = holders.get(newcomer)?.addr;
    // Per address: how many it holds, its least productive one besides
    // the newcomer, and when its youngest was accepted.
    let mut per_address: HashMap<IpAddr, (usize, Option<usize>, Instant)> = HashMap::new();
    for (i, h) in holders.iter().enumerate() {
        let entry = per_address.entry(h.addr).or_insert((0, None, h.accepted));
        entry.0 += 1;
        entry.2 = entry.2.max(h.accepted);
        if i != newcomer && entry.1.is_none_or(|least| h.rank < holders[least].rank) {
            entry.1 = Some(i);
        }
    }
    let mine = per_address.get(&own).map_or(0, |e| e.0);
    if per_address.len() == 1 {
        return Some(per_address.get(&own)?.1.unwrap_or(newcomer));
    }
    let most = (per_address.iter())
        .filter(|(addr, entry)| **addr != own && entry.0 > mine)
        .max_by(|(a, x), (b, y)| (x.0, x.2, *a).cmp(&(y.0, y.2, *b)));
    match most {
        Some((_, (_, least, _))) => *least,
        None => Some(newcomer),
    }
}

#[cfg(test)]
mod tests;
