//! `audit --upgrade-to` and `mutate --compare-to`: a pod as the current
//! KServe release makes it and as the target release will, their
//! difference field by field ([`changes`]), and why each field changes.
//!
//! Why is found by running the mutator, not by matching fields to rows by
//! hand. Every behaviour that differs between releases is a switch
//! ([`crate::release::Switch`], which carries its docs/compatibility.md
//! row), and the config parser and the injectors read the switches
//! through a [`Behaviour`](crate::release::Behaviour), so any combination
//! of switch values can run. Between the current release with the current
//! ConfigMap and the target release with the target's ConfigMap lie the
//! switches that differ and the ConfigMap values that differ (each a
//! "move"); a change is attributed to
//! - each move that, made alone from either end, moves that field (its
//!   value; its presence, for an entry added or removed; its entries'
//!   order, for a reordering): this finds every move the change needs,
//!   also where it needs two (S3 settings in a Secret's data need both
//!   v0.16's reading of the data and its endpoint rules);
//! - each waypoint of a walk that makes the moves one at a time (the
//!   switches in the order the releases between them changed them, so the
//!   walk passes through each release on the way, then the ConfigMap
//!   values) where the field moves. The walk starts at the old value and
//!   ends at the new one, so it moves the field somewhere: a change
//!   where each of two moves would do on its own, which no single flip
//!   back reveals, still gets a cause.
//!
//! So no change goes without a cause while every difference between
//! releases is a switch. The walk's last step, the rest of the target's
//! ConfigMap (what the mutator does not read), explains nothing: a change
//! attributed to it is `unexplained`, a bug of ours. A denied pod tells
//! nothing about a field, so a flip that denies it is left out of a
//! field's causes, and so is a walk through a denial while a flip explains
//! the field.
//!
//! A pod that stays the same costs two mutations; one that changes, one
//! per waypoint and two per move.

mod attribute;
pub(crate) mod changes;
pub(crate) mod keys;
pub(crate) mod report;
mod table;
mod walk;

use crate::cluster::ClusterSnapshot;
use crate::config::{manifest_data, Config, ConfigError, Resources};
use crate::inputs::Inputs;
use crate::mutation::{mutate, mutate_template, MutationError};
use crate::pod_facts::PodFacts;
use crate::release::Release;
use attribute::{Found, Outcome};
// Named outside the core by tests/core alone (the oracle feature), as audit.rs says.
#[cfg(not(feature = "oracle"))]
use changes::{Causes, Change};
#[cfg(feature = "oracle")]
pub use changes::{Causes, Change, ChangeKind};
pub(crate) use keys::KeyReading;
pub(crate) use report::Admission;
pub use report::{PodRow, UpgradeReport};
use serde_json::Value;
use std::collections::BTreeMap;
use walk::Mover;

/// One end of the upgrade: a release and the ConfigMap it reads.
#[derive(Debug)]
pub struct Side {
    pub release: Release,
    /// `inferenceservice-config`'s data.
    pub data: BTreeMap<String, String>,
    /// Whether `data` is the release's shipped ConfigMap (no `--config`):
    /// a difference between two shipped ConfigMaps is then the row that
    /// names it.
    pub(crate) shipped: bool,
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
#[derive(Debug, Clone, Copy)]
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

/// A config's inputs (our own settings, that config), or why its
/// ConfigMap is refused.
type Run = Result<Inputs, ConfigError>;

/// The two releases, their ConfigMaps, and the configs between them.
#[derive(Debug)]
pub struct Upgrade {
    current: Side,
    target: Side,
    /// The walk's waypoints, the first the current end, the last the target's.
    walk: Vec<(Option<Mover>, Run)>,
    /// Each move alone, from the current end (`false`) or the target's (`true`).
    flips: Vec<(bool, Mover, Run)>,
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
        let plan = walk::plan(&current, &target, defaults);
        if let Some(Err(e)) = plan.walk.first().map(|w| &w.config) {
            return Err(e.clone());
        }
        let inputs = |config: Result<Config, ConfigError>| {
            config.map(|config| {
                let mut inputs = settings.clone();
                inputs.edit_config(|c| *c = config);
                inputs
            })
        };
        let walk = (plan.walk.into_iter())
            .map(|p| (p.mover, inputs(p.config)))
            .collect();
        let flips = (plan.flips.into_iter())
            .filter_map(|(back, p)| Some((back, p.mover?, inputs(p.config))))
            .collect();
        Ok(Self {
            current,
            target,
            walk,
            flips,
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
        let mut run = |inputs: &Run| outcome(inputs, object, form, namespace, &mut lookup);
        let mut walk = Vec::with_capacity(self.walk.len());
        walk.push(run(&self.walk[0].1)?);
        let end = run(&self.walk[self.walk.len() - 1].1)?;
        if walk[0] == end {
            let admission = match &end {
                Outcome::Denied(m) => Some(Admission::new(Some(m), Some(m), Causes::default())),
                Outcome::Pod(_) => None,
            };
            let changes = Vec::new();
            return Ok(PodChanges { changes, admission });
        }
        for (_, inputs) in &self.walk[1..self.walk.len() - 1] {
            walk.push(run(inputs)?);
        }
        walk.push(end);
        let mut flips = Vec::with_capacity(self.flips.len());
        for (back, mover, inputs) in &self.flips {
            flips.push((*back, mover, run(inputs)?));
        }
        let found = Found {
            upgrade: self,
            walk: &walk,
            flips: &flips,
        };
        let (was, now) = (walk[0].denial(), walk[walk.len() - 1].denial());
        let admission = (was.is_some() || now.is_some())
            .then(|| Admission::new(was, now, found.of_admission()));
        let mut changes = match (&walk[0], &walk[walk.len() - 1]) {
            (Outcome::Pod(old), Outcome::Pod(new)) => changes::diff(old, new),
            _ => Vec::new(),
        };
        let causes: Vec<Causes> = changes.iter().map(|c| found.of_change(c)).collect();
        for (change, causes) in changes.iter_mut().zip(causes) {
            change.causes = causes;
        }
        Ok(PodChanges { changes, admission })
    }
}

fn outcome<E: std::error::Error + 'static>(
    inputs: &Run,
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

#[cfg(test)]
mod tests;
