//! The waypoints from the current release and ConfigMap to the target's,
//! one switch or one ConfigMap key at a time (see the parent module).

use super::Side;
use crate::config::{
    Config, ConfigError, Resources, AGENT_KEY, BATCHER_KEY, CREDENTIALS_KEY, LOGGER_KEY,
    METRICS_AGGREGATOR_KEY, STORAGE_INITIALIZER_KEY,
};
use crate::release::{Behaviour, Release, Switch, ALL};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The ConfigMap keys the mutator reads, in the order it reads them.
const READ_KEYS: [&str; 6] = [
    CREDENTIALS_KEY,
    STORAGE_INITIALIZER_KEY,
    LOGGER_KEY,
    BATCHER_KEY,
    AGENT_KEY,
    METRICS_AGGREGATOR_KEY,
];

/// What a waypoint changed from the one before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mover {
    /// A behaviour switch, set to the target release's value.
    Switch(Switch),
    /// One ConfigMap value (`storageInitializer.enableModelcar`) set to the
    /// target's; `row` when both ConfigMaps are the releases' shipped ones
    /// and a row of docs/compatibility.md names that difference.
    Key {
        key: String,
        row: Option<&'static str>,
    },
    /// The rest of the target's ConfigMap: keys the mutator does not read,
    /// and the exact text of those it does (already equal as JSON).
    Rest,
}

/// One point of the walk: the config the mutator runs with there.
#[derive(Debug)]
pub(super) struct Waypoint {
    /// `None` for the start (the current release and ConfigMap).
    pub mover: Option<Mover>,
    pub config: Result<Config, ConfigError>,
}

/// From `current` to `target`: the current release and ConfigMap, each
/// switch that differs set to the target's value (in the order the
/// releases between them changed it) and each ConfigMap value that differs
/// (switches first, or with `keys_first` the keys), then the rest of the
/// target's ConfigMap. The last waypoint is exactly the target release
/// with the target's ConfigMap.
pub(super) fn waypoints(
    current: &Side,
    target: &Side,
    defaults: &Resources,
    keys_first: bool,
) -> Vec<Waypoint> {
    let mut walk = Walk {
        behaviour: Behaviour::from(current.release),
        data: current.data.clone(),
        defaults,
        out: Vec::new(),
    };
    walk.push(None);
    if keys_first {
        walk.keys(current, target);
        walk.switches(current.release, target.release);
    } else {
        walk.switches(current.release, target.release);
        walk.keys(current, target);
    }
    if walk.data != target.data {
        walk.data = target.data.clone();
        walk.push(Some(Mover::Rest));
    }
    walk.out
}

/// Whether the two ConfigMaps differ in a value the mutator reads, so the
/// walk has keys to order.
pub(super) fn has_keys(current: &Side, target: &Side) -> bool {
    READ_KEYS
        .iter()
        .any(|k| !key_steps(k, &current.data, &target.data).is_empty())
}

struct Walk<'a> {
    behaviour: Behaviour,
    data: BTreeMap<String, String>,
    defaults: &'a Resources,
    out: Vec<Waypoint>,
}

impl Walk<'_> {
    fn push(&mut self, mover: Option<Mover>) {
        let config = Config::from_data_as(&self.data, self.defaults, self.behaviour);
        self.out.push(Waypoint { mover, config });
    }

    fn switches(&mut self, current: Release, target: Release) {
        let switches = switch_order(current, target);
        for (i, &switch) in switches.iter().enumerate() {
            self.behaviour = match i + 1 == switches.len() {
                // The same switches, named as the target release.
                true => Behaviour::from(target),
                false => self.behaviour.with(switch, switch.in_release(target)),
            };
            self.push(Some(Mover::Switch(switch)));
        }
    }

    fn keys(&mut self, current: &Side, target: &Side) {
        let shipped = current.shipped && target.shipped;
        for key in READ_KEYS {
            for (path, text) in key_steps(key, &self.data, &target.data) {
                match text {
                    Some(text) => self.data.insert(key.to_string(), text),
                    None => self.data.remove(key),
                };
                let row = shipped
                    .then(|| shipped_row(&path, current.release, target.release))
                    .flatten();
                self.push(Some(Mover::Key { key: path, row }));
            }
        }
    }
}

/// The releases after `from` up to `to`, in the direction of the walk.
fn between(from: Release, to: Release) -> Vec<Release> {
    let mut path: Vec<Release> = if from <= to {
        ALL.into_iter().filter(|r| *r > from && *r <= to).collect()
    } else {
        ALL.into_iter().filter(|r| *r < from && *r >= to).collect()
    };
    if from > to {
        path.reverse();
    }
    path
}

/// The switches whose value differs between the releases, ordered by the
/// first release on the way that has the target's value: the walk passes
/// through each release between them.
pub(super) fn switch_order(from: Release, to: Release) -> Vec<Switch> {
    let path = between(from, to);
    let mut switches: Vec<(usize, Switch)> = (Switch::ALL.iter().copied())
        .filter(|s| s.in_release(from) != s.in_release(to))
        .map(|s| {
            let want = s.in_release(to);
            let at = path.iter().position(|r| s.in_release(*r) == want);
            (at.unwrap_or(path.len()), s)
        })
        .collect();
    switches.sort();
    switches.into_iter().map(|(_, s)| s).collect()
}

/// The edits that take `data[key]` to `target[key]`: one per JSON value
/// that differs where both are objects (`credentials.s3.s3Endpoint`), else
/// the whole key; each with the key's text after it.
fn key_steps(
    key: &str,
    data: &BTreeMap<String, String>,
    target: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>)> {
    let (from, to) = (data.get(key), target.get(key));
    if from == to {
        return Vec::new();
    }
    let object = |text: Option<&String>| match text.map(|t| serde_json::from_str::<Value>(t)) {
        Some(Ok(Value::Object(map))) => Some(map),
        _ => None,
    };
    let (Some(mut working), Some(goal)) = (object(from), object(to)) else {
        return vec![(key.to_string(), to.cloned())];
    };
    let mut leaves = Vec::new();
    differing_leaves(&mut vec![], &working, &goal, &mut leaves);
    let mut out = Vec::new();
    for (path, value) in leaves {
        set(&mut working, &path, value);
        let text = Value::Object(working.clone()).to_string();
        out.push((format!("{key}.{}", path.join(".")), Some(text)));
    }
    out
}

fn differing_leaves(
    at: &mut Vec<String>,
    from: &Map<String, Value>,
    to: &Map<String, Value>,
    out: &mut Vec<(Vec<String>, Option<Value>)>,
) {
    let added = to.keys().filter(|k| !from.contains_key(*k));
    for key in from.keys().chain(added) {
        at.push(key.clone());
        match (from.get(key), to.get(key)) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => differing_leaves(at, a, b, out),
            (a, b) if a != b => out.push((at.clone(), b.cloned())),
            _ => {}
        }
        at.pop();
    }
}

/// Sets (or, for `None`, removes) the value at `path`, making the objects
/// on the way.
fn set(map: &mut Map<String, Value>, path: &[String], value: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = map;
    for key in parents {
        let entry = here
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(next) = entry else { return };
        here = next;
    }
    match value {
        Some(v) => here.insert(last.clone(), v),
        None => here.remove(last),
    };
}

/// The row of the first release on the way whose shipped ConfigMap holds
/// another value at `path` than the next release's.
fn shipped_row(path: &str, from: Release, to: Release) -> Option<&'static str> {
    let value = |release: Release| {
        let data = super::shipped_data(release);
        let (key, rest) = path.split_once('.').unwrap_or((path, ""));
        let mut here: Value = serde_json::from_str(data.get(key)?).ok()?;
        for part in rest.split('.').filter(|p| !p.is_empty()) {
            here = here.get(part)?.clone();
        }
        Some(here)
    };
    let mut previous = from;
    for next in between(from, to) {
        if value(previous) != value(next) {
            return Config::shipped_row(previous.min(next));
        }
        previous = next;
    }
    None
}
