//! Which switches and ConfigMap values cause a change: the outcomes of
//! one pod at every config of an [`Upgrade`], and what moves between them
//! (see the parent module).

use super::changes::{order_among, value_at, Causes, Change, ChangeKind};
use super::walk::Mover;
use super::Upgrade;
use serde_json::Value;

/// What one config made of the pod.
#[derive(Debug, PartialEq)]
pub(super) enum Outcome {
    Pod(Value),
    Denied(String),
}

impl Outcome {
    pub(super) fn denial(&self) -> Option<&String> {
        match self {
            Outcome::Denied(m) => Some(m),
            Outcome::Pod(_) => None,
        }
    }
}

/// What attribution compares of a change at each waypoint.
#[derive(PartialEq)]
enum Probe<'a> {
    Denied,
    Present(bool),
    Value(Option<&'a Value>),
    Order(Option<Vec<Value>>),
}

/// One pod's outcomes at every config of an [`Upgrade`].
pub(super) struct Found<'a> {
    pub(super) upgrade: &'a Upgrade,
    pub(super) walk: &'a [Outcome],
    pub(super) flips: &'a [(bool, &'a Mover, Outcome)],
}

impl Found<'_> {
    /// The causes of a field's change.
    pub(super) fn of_change(&self, change: &Change) -> Causes {
        self.causes(false, |a, b| probe(change, a) != probe(change, b))
    }

    /// The causes of a denial that differs between the ends.
    pub(super) fn of_admission(&self) -> Causes {
        self.causes(true, |a, b| a.denial() != b.denial())
    }

    /// What moves what `moved` compares: each flip that moves it from its
    /// end, and each waypoint of the walk that moves it. For a field (not
    /// `admission`), a denied outcome tells nothing: such flips are left
    /// out, and so is a walk through a denial unless nothing else moves it.
    fn causes(&self, admission: bool, moved: impl Fn(&Outcome, &Outcome) -> bool) -> Causes {
        let mut causes = Causes::default();
        let ends = [&self.walk[0], &self.walk[self.walk.len() - 1]];
        for (back, mover, outcome) in self.flips {
            let admitted = matches!(outcome, Outcome::Pod(_));
            if (admission || admitted) && moved(ends[usize::from(*back)], outcome) {
                add(&mut causes, Some(mover));
            }
        }
        let through_denial = (self.walk.iter()).any(|o| matches!(o, Outcome::Denied(_)));
        let use_walk = admission || !through_denial || causes == Causes::default();
        for (i, pair) in self.walk.windows(2).enumerate().filter(|_| use_walk) {
            if moved(&pair[0], &pair[1]) {
                add(&mut causes, self.upgrade.walk[i + 1].0.as_ref());
            }
        }
        causes.rows.sort_by_key(|r| row_number(r));
        causes.rows.dedup();
        causes.keys.sort();
        causes.keys.dedup();
        causes.unexplained |= causes.rows.is_empty() && causes.keys.is_empty();
        causes
    }
}

fn add(causes: &mut Causes, mover: Option<&Mover>) {
    match mover {
        Some(Mover::Switch(s)) => causes.rows.extend(s.rows()),
        Some(Mover::Key { row: Some(row), .. }) => causes.rows.push(row),
        Some(Mover::Key { key, row: None }) => causes.keys.push(key.clone()),
        Some(Mover::Rest) | None => causes.unexplained = true,
    }
}

fn probe<'a>(change: &Change, outcome: &'a Outcome) -> Probe<'a> {
    let Outcome::Pod(pod) = outcome else {
        return Probe::Denied;
    };
    match change.kind {
        ChangeKind::Added | ChangeKind::Removed => {
            Probe::Present(value_at(pod, &change.at).is_some())
        }
        ChangeKind::Changed => Probe::Value(value_at(pod, &change.at)),
        ChangeKind::Reordered => {
            let names = change.old.as_ref().and_then(Value::as_array);
            Probe::Order(names.and_then(|names| order_among(pod, &change.at, names)))
        }
    }
}

/// `15.19` as (15, 19), so rows sort as the tables list them.
pub(super) fn row_number(row: &str) -> (u32, u32) {
    let (a, b) = row.split_once('.').unwrap_or((row, ""));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}
