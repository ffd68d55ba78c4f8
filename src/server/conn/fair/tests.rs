use super::*;
use std::time::Duration;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// Holders of (address, rank), each accepted a millisecond after the one
/// before it.
fn holders(list: &[(u8, u32)]) -> Vec<Holder<u32>> {
    let start = Instant::now();
    (list.iter().enumerate())
        .map(|(i, (addr, rank))| Holder {
            addr: ip(*addr),
            accepted: start + Duration::from_millis(i as u64),
            rank: *rank,
        })
        .collect()
}

#[test]
fn the_address_holding_the_most_gives_up_its_least_productive() {
    // Address 2 holds three (ranks 5, 1, 7), address 3 one (rank 0, the
    // least productive of all), the newcomer (address 1) is busy-ranked 9.
    let list = holders(&[(2, 5), (2, 1), (3, 0), (2, 7), (1, 9)]);
    assert_eq!(victim(&list, 4), Some(1));
}

#[test]
fn busy_connections_of_one_address_never_push_out_another_s() {
    // 64 busy connections from one address, the API server's one idle one:
    // a newcomer of the busy address is refused, one of the API server's
    // takes the slot of the busy address's least productive.
    let mut list: Vec<(u8, u32)> = (0..64).map(|i| (2, 100 + (i + 7) % 64)).collect();
    list.push((1, 0));
    list.push((2, 50));
    let busy = holders(&list);
    assert_eq!(victim(&busy, 65), Some(65));
    list[65] = (1, 50);
    let api = holders(&list);
    assert_eq!(victim(&api, 65), Some(57));
}

#[test]
fn a_newcomer_whose_address_holds_as_many_as_any_is_refused() {
    // Every address holds one: a newcomer from a new address.
    let list = holders(&[(1, 0), (2, 0), (3, 5)]);
    assert_eq!(victim(&list, 2), Some(2));
    // Its address holds two with it, as many as address 2.
    let list = holders(&[(1, 0), (2, 0), (2, 3), (3, 9), (3, 5)]);
    assert_eq!(victim(&list, 4), Some(4));
}

#[test]
fn one_address_alone_is_served_as_without_shares() {
    let list = holders(&[(3, 1), (3, 0), (3, 5)]);
    assert_eq!(victim(&list, 2), Some(1));
    let list = holders(&[(3, 5)]);
    assert_eq!(victim(&list, 0), Some(0));
}

#[test]
fn between_equal_other_addresses_the_one_holding_the_youngest_goes_whatever_their_ranks() {
    // Address 2's least productive (rank 0) is less productive than any of
    // address 3's, but address 3 holds the youngest connection.
    let list = holders(&[(2, 0), (3, 6), (2, 4), (3, 8), (1, 9)]);
    assert_eq!(victim(&list, 4), Some(1));
}

#[test]
fn nothing_to_close_without_holders() {
    assert_eq!(victim::<u8>(&[], 0), None);
}
