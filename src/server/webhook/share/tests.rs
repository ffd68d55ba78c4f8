use super::*;

#[test]
fn a_connection_holds_its_own_bytes_before_the_budget() {
    let budget = Budget::new(8 << 20);
    let share = Arc::new(Share::default());
    let mut held = Budget::hold(Some(&share));
    budget.take(&mut held, 1100).unwrap();
    budget.take(&mut held, OWN_BYTES - 1100).unwrap();
    assert_eq!(budget.available(), 8 << 20, "the budget was charged");
    budget.take(&mut held, 10).unwrap();
    assert_eq!(budget.available(), (8 << 20) - 10);
    assert_eq!((held.bytes(), share.pooled()), (OWN_BYTES + 10, 10));
    drop(held);
    assert_eq!((budget.available(), share.pooled()), (8 << 20, 0));
    // Given back: the whole allowance is there again.
    let mut again = Budget::hold(Some(&share));
    budget.take(&mut again, OWN_BYTES).unwrap();
    assert_eq!(budget.available(), 8 << 20);
}

#[test]
fn a_connection_may_hold_only_its_part_of_the_budget() {
    let budget = Budget::new(64 << 20);
    let (one, other) = (Arc::new(Share::default()), Arc::new(Share::default()));
    let mut held = Budget::hold(Some(&one));
    budget.take(&mut held, OWN_BYTES).unwrap();
    budget.take(&mut held, 16 << 20).unwrap();
    assert_eq!(budget.take(&mut held, 1), Err(Full::Connection));
    // Another connection's request still gets bytes.
    let mut theirs = Budget::hold(Some(&other));
    budget.take(&mut theirs, OWN_BYTES).unwrap();
    budget.take(&mut theirs, 16 << 20).unwrap();
    assert_eq!(budget.available(), (64 << 20) - (32 << 20));
}

#[test]
fn one_largest_body_always_fits_a_connection_whatever_the_budget() {
    let budget = Budget::new(MAX_BODY_BYTES + (1 << 20));
    let share = Arc::new(Share::default());
    let mut held = Budget::hold(Some(&share));
    budget.take(&mut held, OWN_BYTES).unwrap();
    budget.take(&mut held, MAX_BODY_BYTES).unwrap();
    assert_eq!(budget.take(&mut held, 1), Err(Full::Connection));
}

#[test]
fn without_a_connection_everything_comes_from_the_budget_and_it_is_exact() {
    let budget = Budget::new(1000);
    let mut held = Budget::hold(None);
    budget.take(&mut held, 600).unwrap();
    assert_eq!(budget.take(&mut Budget::hold(None), 401), Err(Full::Server));
    budget.take(&mut held, 400).unwrap();
    assert_eq!(budget.available(), 0);
    drop(held);
    assert_eq!(budget.available(), 1000);
}

#[test]
fn a_refusal_from_the_budget_leaves_the_connections_count_as_it_was() {
    let budget = Budget::new(MAX_BODY_BYTES);
    let (one, other) = (Arc::new(Share::default()), Arc::new(Share::default()));
    let mut held = Budget::hold(Some(&one));
    budget.take(&mut held, OWN_BYTES).unwrap();
    budget.take(&mut held, MAX_BODY_BYTES).unwrap();
    let mut theirs = Budget::hold(Some(&other));
    budget.take(&mut theirs, OWN_BYTES).unwrap();
    assert_eq!(budget.take(&mut theirs, 1), Err(Full::Server));
    assert_eq!(other.pooled(), 0);
}
