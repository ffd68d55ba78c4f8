//! The configs the attribution runs the mutator with (see the parent
//! module): the waypoints from the current release and ConfigMap to the
//! target's, one switch or ConfigMap value at a time, and each of those
//! moves made alone from either end.

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

/// What a waypoint or a flip changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mover {
    /// A behaviour switch, set to the other release's value.
    Switch(Switch),
    /// One ConfigMap value (`storageInitializer.enableModelcar`) set to the
    /// other ConfigMap's; `row` when both ConfigMaps are the releases'
    /// shipped ones and a row of docs/compatibility.md names that difference.
    Key {
        key: String,
        row: Option<&'static str>,
    },
    /// The rest of the target's ConfigMap: keys the mutator does not read,
    /// and the exact text of those it does (already equal as JSON).
    Rest,
}

/// A config the mutator runs with, and what moved to get there.
#[derive(Debug)]
pub(super) struct Point {
    /// `None` for the start of the walk (the current release and ConfigMap).
    pub mover: Option<Mover>,
    pub config: Result<Config, ConfigError>,
}

/// One value of a ConfigMap key that differs between the two ConfigMaps:
/// a JSON value inside both keys' objects (`path`), or the whole key's
/// text where either is not a JSON object (`path` empty, the values
/// JSON strings).
#[derive(Debug, Clone)]
struct Edit {
    key: &'static str,
    path: Vec<String>,
    current: Option<Value>,
    target: Option<Value>,
    mover: Mover,
}

impl Edit {
    /// `data` with this value set to `value`.
    fn apply(&self, data: &mut BTreeMap<String, String>, value: Option<&Value>) {
        if self.path.is_empty() {
            match value.and_then(Value::as_str) {
                Some(text) => data.insert(self.key.to_string(), text.to_string()),
                None => data.remove(self.key),
            };
            return;
        }
        let parsed = data.get(self.key).map(|t| serde_json::from_str::<Value>(t));
        let mut map = match parsed {
            Some(Ok(Value::Object(map))) => map,
            _ => Map::new(),
        };
        set(&mut map, &self.path, value.cloned());
        data.insert(self.key.to_string(), Value::Object(map).to_string());
    }
}

/// The switches and ConfigMap values that differ, and the configs the
/// attribution runs with.
pub(super) struct Plan {
    /// From the current release and ConfigMap to the target's: each switch
    /// that differs set to the target's value (in the order the releases
    /// between them changed it), then each ConfigMap value that differs,
    /// then the rest of the target's ConfigMap. The last is exactly the
    /// target release with the target's ConfigMap.
    pub walk: Vec<Point>,
    /// Each switch and value moved alone: from the current end (`false`)
    /// to the target's value, and from the target end (`true`) back.
    pub flips: Vec<(bool, Point)>,
}

pub(super) fn plan(current: &Side, target: &Side, defaults: &Resources) -> Plan {
    let read = |data: &BTreeMap<String, String>, behaviour: Behaviour| {
        Config::from_data_as(data, defaults, behaviour)
    };
    let (from, to) = (
        Behaviour::from(current.release),
        Behaviour::from(target.release),
    );
    let switches = switch_order(current.release, target.release);
    let edits = edits(current, target);
    let mut walk = vec![Point {
        mover: None,
        config: read(&current.data, from),
    }];
    let mut flips = Vec::new();
    let mut behaviour = from;
    for (i, &switch) in switches.iter().enumerate() {
        behaviour = match i + 1 == switches.len() {
            // The same switches, named as the target release.
            true => to,
            false => behaviour.with(switch, switch.in_release(target.release)),
        };
        let mover = Some(Mover::Switch(switch));
        walk.push(Point {
            mover: mover.clone(),
            config: read(&current.data, behaviour),
        });
        let there = from.with(switch, switch.in_release(target.release));
        let back = to.with(switch, switch.in_release(current.release));
        flips.push((
            false,
            Point {
                mover: mover.clone(),
                config: read(&current.data, there),
            },
        ));
        flips.push((
            true,
            Point {
                mover,
                config: read(&target.data, back),
            },
        ));
    }
    let mut data = current.data.clone();
    for edit in &edits {
        edit.apply(&mut data, edit.target.as_ref());
        let mover = Some(edit.mover.clone());
        walk.push(Point {
            mover: mover.clone(),
            config: read(&data, to),
        });
        let (mut there, mut back) = (current.data.clone(), target.data.clone());
        edit.apply(&mut there, edit.target.as_ref());
        edit.apply(&mut back, edit.current.as_ref());
        flips.push((
            false,
            Point {
                mover: mover.clone(),
                config: read(&there, from),
            },
        ));
        flips.push((
            true,
            Point {
                mover,
                config: read(&back, to),
            },
        ));
    }
    if data != target.data {
        walk.push(Point {
            mover: Some(Mover::Rest),
            config: read(&target.data, to),
        });
    }
    Plan { walk, flips }
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

/// Every value the mutator reads that differs between the ConfigMaps, in
/// the order it reads them.
fn edits(current: &Side, target: &Side) -> Vec<Edit> {
    let shipped = current.shipped && target.shipped;
    let mut out = Vec::new();
    for key in READ_KEYS {
        let (a, b) = (current.data.get(key), target.data.get(key));
        if a == b {
            continue;
        }
        let object = |text: Option<&String>| match text.map(|t| serde_json::from_str::<Value>(t)) {
            Some(Ok(Value::Object(map))) => Some(map),
            _ => None,
        };
        let mut leaves = Vec::new();
        match (object(a), object(b)) {
            (Some(a), Some(b)) => differing_leaves(&mut vec![], &a, &b, &mut leaves),
            _ => {
                let text = |t: Option<&String>| t.map(|t| Value::String(t.clone()));
                leaves.push((Vec::new(), text(a), text(b)));
            }
        }
        for (path, was, now) in leaves {
            let name = std::iter::once(key.to_string()).chain(path.iter().cloned());
            let name: Vec<String> = name.collect();
            let row = shipped
                .then(|| shipped_row(&name, current.release, target.release))
                .flatten();
            out.push(Edit {
                key,
                path,
                current: was,
                target: now,
                mover: Mover::Key {
                    key: name.join("."),
                    row,
                },
            });
        }
    }
    out
}

type Leaf = (Vec<String>, Option<Value>, Option<Value>);

fn differing_leaves(
    at: &mut Vec<String>,
    from: &Map<String, Value>,
    to: &Map<String, Value>,
    out: &mut Vec<Leaf>,
) {
    let added = to.keys().filter(|k| !from.contains_key(*k));
    for key in from.keys().chain(added) {
        at.push(key.clone());
        match (from.get(key), to.get(key)) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => differing_leaves(at, a, b, out),
            (a, b) if a != b => out.push((at.clone(), a.cloned(), b.cloned())),
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
/// another value at `path` (`[key, field…]`) than the next release's.
fn shipped_row(path: &[String], from: Release, to: Release) -> Option<&'static str> {
    let value = |release: Release| {
        let data = super::shipped_data(release);
        let mut here: Value = serde_json::from_str(data.get(path.first()?)?).ok()?;
        for part in &path[1..] {
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
