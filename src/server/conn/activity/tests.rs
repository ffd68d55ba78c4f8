use super::*;

fn reviewed(activity: &Arc<Activity>, review: bool) {
    activity.in_flight.fetch_add(1, Ordering::SeqCst);
    drop(Busy(activity.clone(), review));
}

const ONE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
const TWO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

#[test]
fn of_the_address_holding_the_most_the_least_productive_is_evicted_first_and_once() {
    let (open, metrics) = (Arc::new(Open::default()), Arc::new(Metrics::new()));
    let (reviewing, _a) = open.enter(&metrics, TWO);
    let (stalled, _b) = open.enter(&metrics, TWO);
    let (refused, _c) = open.enter(&metrics, TWO);
    let (handshaking, _d) = open.enter(&metrics, TWO);
    for done in [&reviewing, &stalled, &refused] {
        done.handshaken.store(true, Ordering::Relaxed);
    }
    reviewed(&reviewing, true);
    // Requests that ended without a review, and one in flight: no progress.
    reviewed(&refused, false);
    stalled.in_flight.fetch_add(1, Ordering::SeqCst);
    // A newcomer of another address. Never reviewed: past the handshake
    // with nothing in flight, then the others (in the handshake, or a
    // request in flight) the first accepted first; the one that reviewed is
    // never evicted for an address that holds as many.
    let (newcomer, _e) = open.enter(&metrics, ONE);
    let order = [&refused, &stalled, &handshaking];
    for (i, next) in order.iter().enumerate() {
        assert_eq!(open.evict_for(&newcomer), Eviction::Other);
        assert!(next.share.evict.is_cancelled(), "evicted {i}th");
        for later in &order[i + 1..] {
            assert!(!later.share.evict.is_cancelled(), "too early at {i}");
        }
    }
    assert_eq!(open.evict_for(&newcomer), Eviction::Newcomer);
    assert!(!reviewing.share.evict.is_cancelled());
}

#[test]
fn a_newcomer_of_the_address_holding_the_most_is_refused_one_alone_takes_a_slot_of_its_own() {
    let (open, metrics) = (Arc::new(Open::default()), Arc::new(Metrics::new()));
    let (older, _a) = open.enter(&metrics, TWO);
    let (newcomer, _b) = open.enter(&metrics, TWO);
    // One address alone: its newcomer takes the slot of the other.
    assert_eq!(open.evict_for(&newcomer), Eviction::Other);
    assert!(older.share.evict.is_cancelled());
    let (api, _c) = open.enter(&metrics, ONE);
    api.handshaken.store(true, Ordering::Relaxed);
    reviewed(&api, true);
    let (again, _d) = open.enter(&metrics, ONE);
    // Its address holds as many as the other's (two with it): refused.
    assert_eq!(open.evict_for(&again), Eviction::Newcomer);
    // Every connection is closing already: nothing to tell.
    for closing in [&api, &newcomer, &again] {
        closing.share.evict.cancel();
    }
    assert_eq!(open.evict_for(&again), Eviction::None);
}

#[test]
fn of_connections_that_reviewed_the_one_that_reviewed_longest_ago_goes_first() {
    let (open, metrics) = (Arc::new(Open::default()), Arc::new(Metrics::new()));
    let (earlier, _a) = open.enter(&metrics, TWO);
    let (later, _b) = open.enter(&metrics, TWO);
    reviewed(&later, true);
    std::thread::sleep(Duration::from_millis(2));
    reviewed(&earlier, true);
    let (newcomer, _c) = open.enter(&metrics, ONE);
    assert_eq!(open.evict_for(&newcomer), Eviction::Other);
    assert!(later.share.evict.is_cancelled() && !earlier.share.evict.is_cancelled());
}

#[test]
fn an_outbox_is_stalled_from_the_first_look_that_finds_it_waiting_unmoved() {
    let outbox = Outbox::new(Arc::new(Metrics::new()));
    let mut watch = OutboxWatch::default();
    assert_eq!(watch.look(&outbox), None);
    let mut answer = crate::server::webhook::reply::ReplyBody::new(vec![1u8; 100].into());
    let outbox = Arc::new(outbox);
    answer.queue_in(&outbox);
    let first = watch.look(&outbox).expect("waiting");
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        watch.look(&outbox),
        Some(first),
        "no progress: still since the first look"
    );
    drop(answer);
    assert_eq!(watch.look(&outbox), None);
}

#[test]
fn a_review_long_ago_protects_nothing_against_a_new_connection() {
    let metrics = Arc::new(Metrics::new());
    let open = Arc::new(Open::default());
    let (idle, _a) = open.enter(&metrics, ONE);
    idle.handshaken.store(true, Ordering::Relaxed);
    reviewed(&idle, true);
    let (new, _b) = open.enter(&metrics, ONE);
    let now = new.epoch;
    assert!(
        idle.productivity(now) > new.productivity(now),
        "a review just now"
    );
    let later = now + RECENT + Duration::from_secs(1);
    assert!(
        idle.productivity(later) < new.productivity(later),
        "silent since a review {RECENT:?} ago, before a connection in its handshake"
    );
}
