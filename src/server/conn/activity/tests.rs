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
    reviewed(&reviewing, true);
    // Requests that ended without a review, and one in flight: no progress.
    reviewed(&refused, false);
    stalled.in_flight.fetch_add(1, Ordering::SeqCst);
    // Never reviewed, the first accepted first; then the one that reviewed.
    assert!(open.evict_least_productive());
    assert!(stalled.share.evict.is_cancelled() && !refused.share.evict.is_cancelled());
    assert!(open.evict_least_productive());
    assert!(refused.share.evict.is_cancelled());
    assert!(!reviewing.share.evict.is_cancelled());
    assert!(open.evict_least_productive());
    assert!(reviewing.share.evict.is_cancelled());
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
