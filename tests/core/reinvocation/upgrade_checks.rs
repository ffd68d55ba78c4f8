//! The checks of the upgrade properties (`upgrade.rs`): the two pods'
//! difference by a flattening written here, apart from the core's, and the
//! rows of docs/compatibility.md, read here.

use super::*;
use kserve_injector_core::audit::{Causes, Change, ChangeKind};
use kserve_injector_core::internals::Switch;

/// Rows of docs/compatibility.md's tables (`| 15.4 | …`, `| 15.0.1 | …`).
pub(super) fn compatibility_rows() -> &'static BTreeSet<String> {
    static ROWS: OnceLock<BTreeSet<String>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/compatibility.md");
        let doc = std::fs::read_to_string(path).expect("docs/compatibility.md");
        (doc.lines())
            .filter_map(|line| line.strip_prefix("| ")?.split_once(" |"))
            .map(|(id, _)| id.trim().to_string())
            .filter(|id| {
                let parts: Vec<&str> = id.split('.').collect();
                (2..=3).contains(&parts.len())
                    && (parts.iter())
                        .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
            })
            .collect()
    })
}

pub(super) fn check_causes(what: &str, causes: &Causes) -> Result<(), String> {
    check!(!causes.unexplained, "{what}: unexplained ({causes:?})");
    check!(
        causes.keys.is_empty(),
        "{what}: ConfigMap keys {:?}, but both sides read one ConfigMap",
        causes.keys
    );
    check!(!causes.rows.is_empty(), "{what}: no row");
    let rows = compatibility_rows();
    for row in &causes.rows {
        check!(
            rows.contains(*row),
            "{what}: row {row} is not in docs/compatibility.md"
        );
    }
    Ok(())
}

fn plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn field(path: &str, key: &str) -> String {
    match (path.is_empty(), plain(key)) {
        (_, false) => format!("{path}[{key:?}]"),
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
    }
}

/// The named entries of a list, when each has a name of its own.
fn names(items: &[Value], key: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let name = item.get(key)?.as_str()?.to_string();
        if out.contains(&name) {
            return None;
        }
        out.push(name);
    }
    Some(out)
}

/// Leaves by path (an empty object is a leaf; an empty list is nothing, as
/// an absent one), and the names of each named list in order.
#[derive(Default)]
struct Flat {
    leaves: BTreeMap<String, Value>,
    orders: BTreeMap<String, Vec<String>>,
}

impl Flat {
    fn of(pod: &Value) -> Self {
        let mut flat = Flat::default();
        for key in ["labels", "annotations"] {
            if let Some(v) = pod.pointer(&format!("/metadata/{key}")) {
                flat.add(v, format!("metadata.{key}"), key);
            }
        }
        if let Some(spec) = pod.get("spec") {
            flat.add(spec, "spec".into(), "spec");
        }
        flat
    }

    fn add(&mut self, v: &Value, path: String, last: &str) {
        match v {
            Value::Object(m) if m.is_empty() => {
                self.leaves.insert(path, v.clone());
            }
            Value::Object(m) => {
                for (k, v) in m {
                    self.add(v, field(&path, k), k);
                }
            }
            Value::Array(a) if a.is_empty() => {}
            Value::Array(a) => {
                let key = if last == "volumeMounts" {
                    "mountPath"
                } else {
                    "name"
                };
                match names(a, key) {
                    Some(names) => {
                        for (item, name) in a.iter().zip(&names) {
                            self.add(item, format!("{path}[{name}]"), "");
                        }
                        self.orders.insert(path, names);
                    }
                    None => {
                        self.leaves.insert(path, v.clone());
                    }
                }
            }
            _ => {
                self.leaves.insert(path, v.clone());
            }
        }
    }

    /// The leaves at or under `path`, with `path` itself as the root.
    fn under(&self, path: &str) -> BTreeMap<String, Value> {
        (self.leaves.iter())
            .filter(|(l, _)| within_path(l, path))
            .map(|(l, v)| (l.clone(), v.clone()))
            .collect()
    }
}

fn within_path(leaf: &str, path: &str) -> bool {
    leaf == path
        || leaf
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The leaves of `value` placed at `path` (as [`Flat::add`] would).
fn rooted(value: Option<&Value>, path: &str) -> BTreeMap<String, Value> {
    let mut flat = Flat::default();
    if let Some(v) = value {
        let last = path.rsplit(['.', '[']).next().unwrap_or_default();
        flat.add(v, path.to_string(), last.trim_end_matches(']'));
    }
    flat.leaves
}

pub(super) fn check_difference(old: &Value, new: &Value, changes: &[Change]) -> Result<(), String> {
    let (a, b) = (Flat::of(old), Flat::of(new));
    let all: BTreeSet<&String> = a.leaves.keys().chain(b.leaves.keys()).collect();
    let differing: Vec<&String> = all
        .into_iter()
        .filter(|l| a.leaves.get(*l) != b.leaves.get(*l))
        .collect();
    for leaf in &differing {
        check!(
            changes
                .iter()
                .any(|c| c.kind != ChangeKind::Reordered && within_path(leaf, &c.path)),
            "lost: {leaf} is {:?}, then {:?}, and no change covers it",
            a.leaves.get(*leaf),
            b.leaves.get(*leaf)
        );
    }
    for c in changes.iter().filter(|c| c.kind != ChangeKind::Reordered) {
        check!(
            differing.iter().any(|l| within_path(l, &c.path)),
            "invented: nothing under {} differs ({c:?})",
            c.path
        );
        check!(
            rooted(c.old.as_ref(), &c.path) == a.under(&c.path),
            "{}: old value is not the first pod's ({c:?})",
            c.path
        );
        check!(
            rooted(c.new.as_ref(), &c.path) == b.under(&c.path),
            "{}: new value is not the second pod's ({c:?})",
            c.path
        );
        let kind = match (c.old.is_some(), c.new.is_some()) {
            (false, true) => ChangeKind::Added,
            (true, false) => ChangeKind::Removed,
            _ => ChangeKind::Changed,
        };
        check!(
            c.kind == kind,
            "{}: {:?} with old {:?} and new {:?}",
            c.path,
            c.kind,
            c.old,
            c.new
        );
    }
    for (path, was) in &a.orders {
        let Some(now) = b.orders.get(path) else {
            continue;
        };
        let common = |x: &[String], y: &[String]| -> Vec<Value> {
            x.iter()
                .filter(|n| y.contains(n))
                .map(|n| json!(n))
                .collect()
        };
        let (x, y) = (common(was, now), common(now, was));
        let reported = changes
            .iter()
            .find(|c| c.kind == ChangeKind::Reordered && &c.path == path);
        match reported {
            Some(c) => check!(
                x != y && c.old == Some(json!(x)) && c.new == Some(json!(y)),
                "{path}: reordering {c:?}, the pods' orders are {x:?} and {y:?}"
            ),
            None => check!(x == y, "lost: {path} reordered from {x:?} to {y:?}"),
        }
    }
    for c in changes.iter().filter(|c| c.kind == ChangeKind::Reordered) {
        check!(
            a.orders.contains_key(&c.path) && b.orders.contains_key(&c.path),
            "invented reordering {c:?}"
        );
    }
    Ok(())
}

/// The rows of each release's table (`### v0.17.0 and v0.17.1` up to the
/// next heading), for each tag the heading names.
fn rows_by_release() -> BTreeMap<String, BTreeSet<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/compatibility.md");
    let doc = std::fs::read_to_string(path).expect("docs/compatibility.md");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut tags: Vec<String> = Vec::new();
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            tags = heading
                .split(" and ")
                .map(|t| t.trim().to_string())
                .collect();
        } else if let Some((id, _)) = line.strip_prefix("| ").and_then(|l| l.split_once(" |")) {
            if compatibility_rows().contains(id.trim()) {
                for tag in &tags {
                    out.entry(tag.clone())
                        .or_default()
                        .insert(id.trim().to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_switch_row_is_in_the_table_of_a_release_that_has_the_older_behaviour() {
    let tables = rows_by_release();
    for release in Release::SUPPORTED.iter().filter(|r| **r != Release::Head) {
        assert!(
            tables.contains_key(release.as_str()),
            "no table for {release}: {tables:?}"
        );
    }
    // A row's number names the release whose next release changed it
    // (15.x: the v0.15 line's last, changed in v0.16.0; 20.x: after
    // v0.20.0; 15.0.x: v0.15.0, changed in v0.15.1).
    let changed_after = |row: &str| -> Release {
        let parts: Vec<&str> = row.split('.').collect();
        let named = |r: &Release| match parts.as_slice() {
            [minor, patch, _] => r.as_str() == format!("v0.{minor}.{patch}"),
            [minor, _] => r.as_str().starts_with(&format!("v0.{minor}.")),
            _ => false,
        };
        (Release::SUPPORTED.iter().copied())
            .rev()
            .find(named)
            .unwrap_or_else(|| panic!("row {row} names no release"))
    };
    for switch in Switch::ALL {
        for row in switch.rows() {
            let release = changed_after(row);
            let next = Release::SUPPORTED
                .iter()
                .copied()
                .find(|r| *r > release)
                .expect("a next release");
            assert_ne!(
                switch.in_release(release),
                switch.in_release(next),
                "{switch:?}: row {row} says {next} changed it"
            );
            let older: Vec<&str> = (Release::SUPPORTED.iter())
                .filter(|r| !switch.in_release(**r))
                .map(|r| r.as_str())
                .collect();
            assert!(
                older
                    .iter()
                    .any(|r| tables.get(*r).is_some_and(|t| t.contains(*row))),
                "{switch:?}: row {row} is in none of the tables of {older:?}"
            );
        }
    }
    for release in Release::SUPPORTED {
        if let Some(row) = Config::shipped_row(*release) {
            let table = tables.get(release.as_str());
            assert!(
                table.is_some_and(|t| t.contains(row)),
                "{release}'s shipped row {row}"
            );
        }
    }
}
