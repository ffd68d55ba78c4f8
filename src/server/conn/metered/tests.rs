use super::*;

#[test]
fn a_waiting_write_is_dated_until_a_write_completes() {
    let stall = WriteStall::new(Instant::now());
    assert_eq!(stall.since(), None);
    stall.record(&Poll::<()>::Pending);
    let first = stall.since().expect("waiting");
    std::thread::sleep(Duration::from_millis(2));
    // Still the same wait: its start does not move.
    stall.record(&Poll::<()>::Pending);
    assert_eq!(stall.since(), Some(first));
    stall.record(&Poll::Ready(()));
    assert_eq!(stall.since(), None);
}
