//! `audit --upgrade-to` and `mutate --compare-to`: a pod as the current
//! KServe release makes it and as the target release will, their
//! difference field by field ([`changes`]), and why each field changes.
//!
//! Why is found by running the mutator, not by matching fields to rows by
//! hand. Every behaviour that differs between releases is a switch
//! ([`crate::release::Switch`], which carries its docs/compatibility.md
//! rows), and the config parser and the injectors read the switches
//! through a [`Behaviour`](crate::release::Behaviour), so any combination
//! of switch values can run. The walk ([`walk`]) goes from the current
//! release with the current ConfigMap to the target release with the
//! target's ConfigMap one waypoint at a time: each switch that differs is
//! set to the target's value (in the order the releases between them made
//! the change, so the walk passes through each release on the way), then
//! each ConfigMap value that differs. The pod is mutated at every waypoint,
//! and a change is attributed to each waypoint where that field (its
//! presence, for an entry added or removed; its entries' order, for a
//! reordering) differs from the waypoint before. The first waypoint gives
//! the old value and the last the new one, so every change is attributed
//! to at least one waypoint: none goes unexplained while every difference
//! between releases is a switch. A waypoint no switch or key explains (the
//! target ConfigMap's text beyond the values the mutator reads) is
//! reported as `unexplained`, which is then a bug of ours.
//!
//! Flipping one switch at a time from either end would be order-free but
//! could miss a change that needs two switches together (a field one
//! switch adds and another fills); the walk never misses one, and where
//! two switches interact it names each that moved the field on the way.
//! Where the ConfigMaps differ too, a second walk takes the keys before
//! the switches, and a change is attributed to what moves it on either
//! walk: a modelcar the target's ConfigMap turns on is then the key's,
//! and the shape the target release gives it the switches'. A walk that
//! passes through a refused ConfigMap or a denied pod tells nothing about
//! a field, so it is left out of a field's attribution while another
//! walk admits the pod all the way.
//!
//! Pods only differ when the two outcomes differ, so a pod that stays the
//! same costs two mutations; one that changes, one per waypoint of each walk.

pub mod changes;
pub mod keys;
pub mod report;
mod walk;

use crate::cluster::ClusterSnapshot;
use crate::config::{manifest_data, Config, ConfigError, Resources};
use crate::inputs::Inputs;
use crate::mutation::{mutate, mutate_template, MutationError};
use crate::pod_facts::PodFacts;
use crate::release::Release;
use changes::{order_among, value_at};
pub use changes::{Causes, Change, ChangeKind};
pub use keys::KeyReading;
pub use report::{Admission, PodRow, UpgradeReport, UpgradeStatus};
use serde_json::Value;
use std::collections::BTreeMap;
use walk::{Mover, Waypoint};

/// One end of the upgrade: a release and the ConfigMap it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub release: Release,
    /// `inferenceservice-config`'s data.
    pub data: BTreeMap<String, String>,
    /// Whether `data` is the release's shipped ConfigMap (no `--config`):
    /// a difference between two shipped ConfigMaps is then the row that
    /// names it.
    pub shipped: bool,
}

impl Side {
    pub fn new(release: Release, data: BTreeMap<String, String>) -> Self {
        Self {
            release,
            data,
            shipped: false,
        }
    }

    /// The release with the ConfigMap it shipped ([`Config::shipped`]).
    pub fn shipped(release: Release) -> Self {
        Self {
            release,
            data: shipped_data(release),
            shipped: true,
        }
    }
}

fn shipped_data(release: Release) -> BTreeMap<String, String> {
    // Compile-time constants, parsed by the config's unit tests.
    match manifest_data(Config::shipped_manifest(release)) {
        Ok(data) => data,
        Err(e) => unreachable!("the shipped ConfigMap of {release} is invalid: {e}"),
    }
}

/// Whether the object is a pod, or a workload's pod template (which gets
/// no `metadata.namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Pod,
    Template,
}

/// Why a pod could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Decode(MutationError),
    #[error("cluster lookup: {0}")]
    Lookup(#[source] E),
}

/// The comparison of one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodChanges {
    pub changes: Vec<Change>,
    /// Set when either release denies the pod.
    pub admission: Option<Admission>,
}

/// The waypoints of one walk: each one's inputs (our own settings, its
/// config), or why its ConfigMap is refused.
type Walk = Vec<(Option<Mover>, Result<Inputs, ConfigError>)>;

/// The two releases, their ConfigMaps, and the walks between them.
#[derive(Debug)]
pub struct Upgrade {
    current: Side,
    target: Side,
    /// Switches first; then, when the ConfigMaps differ, keys first. Both
    /// start and end at the same waypoints.
    walks: Vec<Walk>,
}

/// What one waypoint made of the pod.
#[derive(Debug, PartialEq)]
enum Outcome {
    Pod(Value),
    Denied(String),
}

/// What attribution compares of a change at each waypoint.
#[derive(PartialEq)]
enum Probe<'a> {
    Denied,
    Present(bool),
    Value(Option<&'a Value>),
    Order(Option<Vec<Value>>),
}

impl Upgrade {
    /// `settings` carries what both releases run with besides the config
    /// (our modelcar mode, security profile, model volume, controller
    /// namespace); `defaults`, our settings file's storage-initializer
    /// resources. The current ConfigMap must be one the current release
    /// accepts; a target that refuses its own is a denial of every pod.
    pub fn new(
        current: Side,
        target: Side,
        settings: &Inputs,
        defaults: &Resources,
    ) -> Result<Self, ConfigError> {
        let orders = match walk::has_keys(&current, &target) {
            true => vec![false, true],
            false => vec![false],
        };
        let mut walks = Vec::new();
        for keys_first in orders {
            let waypoints: Vec<Waypoint> = walk::waypoints(&current, &target, defaults, keys_first);
            if let Some(Err(e)) = waypoints.first().map(|w| &w.config) {
                return Err(e.clone());
            }
            walks.push(
                (waypoints.into_iter())
                    .map(|w| {
                        let inputs = w.config.map(|config| {
                            let mut inputs = settings.clone();
                            *inputs.config_mut() = config;
                            inputs
                        });
                        (w.mover, inputs)
                    })
                    .collect(),
            );
        }
        Ok(Self {
            current,
            target,
            walks,
        })
    }

    pub fn current(&self) -> Release {
        self.current.release
    }

    pub fn target(&self) -> Release {
        self.target.release
    }

    /// The ConfigMap keys the target release reads differently.
    pub fn config_keys(&self) -> Vec<KeyReading> {
        keys::readings(&self.current, &self.target)
    }

    /// `object` under both releases: what changes and why. `lookup` gives
    /// the cluster objects a pod needs under a config (each waypoint's).
    pub fn pod<E: std::error::Error + 'static>(
        &self,
        object: &Value,
        form: Form,
        namespace: &str,
        mut lookup: impl FnMut(&PodFacts, &Config) -> Result<ClusterSnapshot, E>,
    ) -> Result<PodChanges, UpgradeError<E>> {
        let mut run = |inputs: &Result<Inputs, ConfigError>| {
            outcome(inputs, object, form, namespace, &mut lookup)
        };
        let ends = &self.walks[0];
        let (first, end) = (run(&ends[0].1)?, run(&ends[ends.len() - 1].1)?);
        if first == end {
            let admission = match &end {
                Outcome::Denied(m) => Some(Admission::new(Some(m), Some(m), Causes::default())),
                Outcome::Pod(_) => None,
            };
            let changes = Vec::new();
            return Ok(PodChanges { changes, admission });
        }
        // Each walk's outcomes; the ends are shared.
        let mut walks: Vec<Vec<Outcome>> = Vec::new();
        for walk in &self.walks {
            let mut outcomes = Vec::with_capacity(walk.len());
            for (_, inputs) in &walk[1..walk.len() - 1] {
                outcomes.push(run(inputs)?);
            }
            walks.push(outcomes);
        }
        let at = |w: usize, i: usize| -> &Outcome {
            match i {
                0 => &first,
                i if i == self.walks[w].len() - 1 => &end,
                i => &walks[w][i - 1],
            }
        };
        let denial = |o: &Outcome| match o {
            Outcome::Denied(m) => Some(m.clone()),
            Outcome::Pod(_) => None,
        };
        let (was, now) = (denial(&first), denial(&end));
        let every: Vec<usize> = (0..self.walks.len()).collect();
        let admission = (was.is_some() || now.is_some()).then(|| {
            let causes = self.attribute(&every, &at, |a, b| denial(a) != denial(b));
            Admission::new(was.as_ref(), now.as_ref(), causes)
        });
        let mut changes = match (&first, &end) {
            (Outcome::Pod(old), Outcome::Pod(new)) => changes::diff(old, new),
            _ => Vec::new(),
        };
        // A walk through a denial says nothing of a field; another may.
        let admitting: Vec<usize> = (every.iter().copied())
            .filter(|&w| (1..self.walks[w].len() - 1).all(|i| matches!(at(w, i), Outcome::Pod(_))))
            .collect();
        let walks_for_fields = if admitting.is_empty() {
            &every
        } else {
            &admitting
        };
        let causes: Vec<Causes> = (changes.iter())
            .map(|c| self.attribute(walks_for_fields, &at, |a, b| probe(c, a) != probe(c, b)))
            .collect();
        for (change, causes) in changes.iter_mut().zip(causes) {
            change.causes = causes;
        }
        Ok(PodChanges { changes, admission })
    }

    /// The causes of the waypoints, on each of `walks`, where what `moved`
    /// compares moves.
    fn attribute<'o>(
        &self,
        walks: &[usize],
        at: &impl Fn(usize, usize) -> &'o Outcome,
        moved: impl Fn(&Outcome, &Outcome) -> bool,
    ) -> Causes {
        let mut causes = Causes::default();
        for &w in walks {
            for i in 1..self.walks[w].len() {
                if !moved(at(w, i - 1), at(w, i)) {
                    continue;
                }
                match &self.walks[w][i].0 {
                    Some(Mover::Switch(s)) => causes.rows.extend(s.rows()),
                    Some(Mover::Key { row: Some(row), .. }) => causes.rows.push(row),
                    Some(Mover::Key { key, row: None }) => causes.keys.push(key.clone()),
                    Some(Mover::Rest) | None => causes.unexplained = true,
                }
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

fn outcome<E: std::error::Error + 'static>(
    inputs: &Result<Inputs, ConfigError>,
    object: &Value,
    form: Form,
    namespace: &str,
    lookup: &mut impl FnMut(&PodFacts, &Config) -> Result<ClusterSnapshot, E>,
) -> Result<Outcome, UpgradeError<E>> {
    let inputs = match inputs {
        Ok(inputs) => inputs,
        Err(e) => return Ok(Outcome::Denied(e.to_string())),
    };
    let facts = PodFacts::from_pod_value(object, namespace, &inputs.config);
    let objects = lookup(&facts, &inputs.config).map_err(UpgradeError::Lookup)?;
    let inputs = inputs.with_cluster(objects);
    let mutated = match form {
        Form::Pod => mutate(object, namespace, &inputs),
        Form::Template => mutate_template(object, namespace, &inputs),
    };
    match mutated {
        Ok(m) => Ok(Outcome::Pod(m.pod)),
        Err(MutationError::Inject(e)) => Ok(Outcome::Denied(e.message)),
        Err(e) => Err(UpgradeError::Decode(e)),
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
fn row_number(row: &str) -> (u32, u32) {
    let (a, b) = row.split_once('.').unwrap_or((row, ""));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests;
