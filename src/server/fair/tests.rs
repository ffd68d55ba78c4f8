use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

#[test]
fn the_address_holding_the_most_gives_up_its_least_productive() {
    // Address 2 holds three (ranks 5, 1, 7), address 3 one (rank 0, the
    // least productive of all), the newcomer (address 1) is busy-ranked 9.
    let holders = [(ip(2), 5), (ip(2), 1), (ip(3), 0), (ip(2), 7), (ip(1), 9)];
    assert_eq!(victim(&holders, 4), Some(1));
}

#[test]
fn busy_connections_of_one_address_never_push_out_another_s() {
    // 64 busy connections from one address, the API server's one idle one:
    // a newcomer of the busy address closes one of its own.
    let mut holders: Vec<(IpAddr, u32)> = (0..64).map(|i| (ip(2), 100 + i)).collect();
    holders.push((ip(1), 0));
    holders.push((ip(2), 50));
    let newcomer = holders.len() - 1;
    assert_eq!(victim(&holders, newcomer), Some(newcomer));
}

#[test]
fn between_equal_addresses_the_newcomer_s_own_goes_first() {
    // Every address holds one: the newcomer from a new address is refused
    // rather than taking another's slot, however unproductive that is.
    let holders = [(ip(1), 0), (ip(2), 0), (ip(3), 5)];
    assert_eq!(victim(&holders, 2), Some(2));
    // Its own address holds two (with it): the other of its own goes if
    // less productive, else the newcomer.
    let holders = [(ip(1), 0), (ip(2), 0), (ip(2), 3), (ip(3), 9), (ip(3), 5)];
    assert_eq!(victim(&holders, 4), Some(4));
    let holders = [(ip(3), 1), (ip(2), 0), (ip(3), 5)];
    assert_eq!(victim(&holders, 2), Some(0));
}

#[test]
fn between_equal_other_addresses_the_least_productive_one_goes() {
    let holders = [(ip(2), 4), (ip(2), 6), (ip(3), 2), (ip(3), 8), (ip(1), 0)];
    assert_eq!(victim(&holders, 4), Some(2));
}

#[test]
fn nothing_to_close_without_holders() {
    assert_eq!(victim::<u8>(&[], 0), None);
}
