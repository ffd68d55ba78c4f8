use super::*;

fn reviewed(activity: &Arc<Activity>, review: bool) {
    activity.in_flight.fetch_add(1, Ordering::SeqCst);
    drop(Busy(activity.clone(), review));
}

#[test]
fn the_least_productive_connection_is_evicted_first_and_once() {
    let (open, metrics) = (Arc::new(Open::default()), Arc::new(Metrics::new()));
    let (reviewing, _a) = open.enter(&metrics);
    let (stalled, _b) = open.enter(&metrics);
    let (refused, _c) = open.enter(&metrics);
    let (handshaking, _d) = open.enter(&metrics);
    for done in [&reviewing, &stalled, &refused] {
        done.handshaken.store(true, Ordering::Relaxed);
    }
    reviewed(&reviewing, true);
    // Requests that ended without a review, and one in flight: no progress.
    reviewed(&refused, false);
    stalled.in_flight.fetch_add(1, Ordering::SeqCst);
    // Never reviewed: past the handshake with nothing in flight, then the
    // others (in the handshake, or a request in flight) the first accepted
    // first; then the one that reviewed, whatever the others were doing.
    let order = [&refused, &stalled, &handshaking, &reviewing];
    for (i, next) in order.iter().enumerate() {
        assert!(open.evict_least_productive());
        assert!(next.share.evict.is_cancelled(), "evicted {i}th");
        for later in &order[i + 1..] {
            assert!(!later.share.evict.is_cancelled(), "too early at {i}");
        }
    }
    assert!(
        !open.evict_least_productive(),
        "every connection is closing"
    );
}

#[test]
fn of_connections_that_reviewed_the_one_that_reviewed_longest_ago_goes_first() {
    let (open, metrics) = (Arc::new(Open::default()), Arc::new(Metrics::new()));
    let (earlier, _a) = open.enter(&metrics);
    let (later, _b) = open.enter(&metrics);
    reviewed(&later, true);
    std::thread::sleep(Duration::from_millis(2));
    reviewed(&earlier, true);
    assert!(open.evict_least_productive());
    assert!(later.share.evict.is_cancelled() && !earlier.share.evict.is_cancelled());
}

#[test]
fn an_outbox_is_stalled_from_the_first_look_that_finds_it_waiting_unmoved() {
    let outbox = Outbox::new(Arc::new(Metrics::new()));
    let mut watch = OutboxWatch::default();
    assert_eq!(watch.look(&outbox), None);
    let mut answer = crate::server::answer::AnswerBody::new(vec![1u8; 100].into());
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
    let (idle, _a) = open.enter(&metrics);
    idle.handshaken.store(true, Ordering::Relaxed);
    reviewed(&idle, true);
    let (new, _b) = open.enter(&metrics);
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
