use super::*;

#[test]
fn a_head_is_due_soon_after_the_accept_and_after_its_first_byte_idle_waits_longer() {
    let conn = Conn::new(IpAddr::from([127, 0, 0, 1]));
    assert_eq!(conn.deadline(), conn.epoch + HEAD_TIMEOUT);
    conn.started();
    conn.done();
    let idle = conn.deadline();
    assert!(idle >= conn.epoch + IDLE_TIMEOUT, "idle after an answer");
    std::thread::sleep(Duration::from_millis(2));
    conn.read(10).expect("a small head");
    let head = conn.deadline();
    assert!(
        head < idle && head > conn.epoch + HEAD_TIMEOUT,
        "from its first byte"
    );
}

#[test]
fn a_head_over_the_limit_is_refused_and_bytes_of_a_request_in_flight_are_not_counted() {
    let conn = Conn::new(IpAddr::from([127, 0, 0, 1]));
    conn.read(MAX_HEAD).expect("at the limit");
    assert!(conn.read(1).is_err(), "one byte over");
    let conn = Conn::new(IpAddr::from([127, 0, 0, 1]));
    conn.started();
    conn.read(10 * MAX_HEAD).expect("a request in flight");
    conn.done();
    conn.read(MAX_HEAD).expect("a new head counts from zero");
}

#[test]
fn at_the_cap_the_newcomer_of_the_busiest_address_is_refused_another_evicts_from_it() {
    let open = Arc::new(Open::default());
    let attacker = IpAddr::from([127, 0, 0, 2]);
    let held: Vec<_> = (0..4).map(|_| open.enter(attacker)).collect();
    let (other, _other) = open.enter(IpAddr::from([127, 0, 0, 3]));
    let (newcomer, listed) = open.enter(attacker);
    assert_eq!(
        open.evict_for(&newcomer),
        Some(false),
        "its own address holds the most"
    );
    // Refused: closed and unlisted at once.
    drop(listed);
    let (probe, _listed) = open.enter(IpAddr::from([127, 0, 0, 1]));
    assert_eq!(open.evict_for(&probe), Some(true));
    // The attacker's first accepted.
    assert!(held[0].0.evict.is_cancelled() && !probe.evict.is_cancelled());
    let evicted = held.iter().filter(|(c, _)| c.evict.is_cancelled()).count();
    assert_eq!(evicted, 1);
    assert!(!other.evict.is_cancelled());
}
