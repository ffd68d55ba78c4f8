//! Fair shares of a connection cap between client addresses, for both
//! listeners: at the cap, the connection closed for a newcomer comes from
//! the address holding the most connections (the newcomer counted with its
//! own), and within that address it is the least productive one, then the
//! youngest (possibly the newcomer itself, which is then refused). How
//! productive a connection is, is compared only between connections of one
//! address: many busy connections from one client never push out a
//! connection of another client that holds fewer. Between addresses that
//! hold equally many, the newcomer's own goes first (a newcomer never takes
//! the slot of an address that holds no more than its own), then the one
//! whose least productive connection is the least productive.

use std::collections::HashMap;
use std::net::IpAddr;

/// Of `holders` (each connection's client address and rank, lower ranks
/// closed first; the newcomer at `newcomer`, among them), the index of the
/// one to close. `None` when `holders` is empty.
pub(crate) fn victim<K: Ord + Copy>(holders: &[(IpAddr, K)], newcomer: usize) -> Option<usize> {
    // Per address: how many it holds, and its least productive one.
    let mut per_address: HashMap<IpAddr, (usize, usize)> = HashMap::new();
    for (i, (addr, rank)) in holders.iter().enumerate() {
        let entry = per_address.entry(*addr).or_insert((0, i));
        entry.0 += 1;
        if *rank < holders[entry.1].1 {
            entry.1 = i;
        }
    }
    let own = holders.get(newcomer).map(|(addr, _)| *addr);
    let chosen = per_address.iter().max_by(|(a, x), (b, y)| {
        // More connections first; then the newcomer's own address; then the
        // address whose least productive connection is less productive
        // (reversed, as `max_by` keeps the greatest).
        (x.0.cmp(&y.0))
            .then((Some(**a) == own).cmp(&(Some(**b) == own)))
            .then(holders[y.1].1.cmp(&holders[x.1].1))
            .then(a.cmp(b))
    });
    chosen.map(|(_, (_, least))| *least)
}

#[cfg(test)]
mod tests;
