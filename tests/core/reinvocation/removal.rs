//! `removed_field_is_repaired_without_side_effects` and
//! `removed_container_is_repaired_without_side_effects`: another webhook
//! removes one thing pass 1 added; the next pass puts back only that.

use super::*;

/// Sorts every list whose entries all have a name by that name.
pub(super) fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(normalize).collect();
            if items
                .iter()
                .all(|e| e.get("name").and_then(Value::as_str).is_some())
            {
                items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            }
            Value::Array(items)
        }
        other => other.clone(),
    }
}

pub(super) fn named_list(items: &[Value]) -> bool {
    items
        .iter()
        .all(|e| e.get("name").and_then(Value::as_str).is_some())
}

pub(super) fn by_name<'v>(items: &'v [Value], name: &str) -> Option<&'v Value> {
    items.iter().find(|e| e["name"].as_str() == Some(name))
}

/// Checks a repair pass: `got` (its output) may differ from `damaged` (its
/// input) only by putting back parts of `want` (the pass-1 output). Named
/// entries (containers, volumes, mounts, env, ports) come back whole and
/// exactly as pass 1 had them or not at all; a map or list pass 1 created may
/// come back with only some of its items (several injectors fill the same
/// list, and some of them do not act again). Lists of named entries are
/// matched by name. Returns the first path where `got` has something else.
pub(super) fn bad_repair(
    got: &Value,
    damaged: Option<&Value>,
    want: Option<&Value>,
    path: &str,
) -> Option<String> {
    if Some(got) == damaged || Some(got) == want {
        return None;
    }
    let named_entry = got.get("name").is_some_and(Value::is_string);
    match (got, damaged) {
        (Value::Object(g), Some(Value::Object(_))) | (Value::Object(g), None)
            if damaged.is_some() || !named_entry =>
        {
            g.iter().find_map(|(k, v)| {
                bad_repair(
                    v,
                    damaged.and_then(|d| d.get(k)),
                    want.and_then(|w| w.get(k)),
                    &format!("{path}/{}", escape(k)),
                )
            })
        }
        (Value::Array(g), d)
            if named_list(g) && d.is_none_or(|d| d.as_array().is_some_and(|d| named_list(d))) =>
        {
            g.iter().find_map(|e| {
                let name = e["name"].as_str().unwrap_or_default();
                let w = want
                    .and_then(Value::as_array)
                    .and_then(|w| by_name(w, name));
                let d = d.and_then(Value::as_array).and_then(|d| by_name(d, name));
                bad_repair(e, d, w, &format!("{path}/[{name}]"))
            })
        }
        _ => Some(path.to_string()),
    }
}

/// Resolves a `bad_repair` path (`[name]` steps pick list entries by name).
pub(super) fn lookup<'v>(doc: &'v Value, path: &str) -> Option<&'v Value> {
    let mut node = doc;
    for step in path.split('/').skip(1) {
        node = match step.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(name) => node
                .as_array()?
                .iter()
                .find(|e| e["name"].as_str() == Some(name))?,
            None => node.get(step.replace("~1", "/").replace("~0", "~"))?,
        };
    }
    Some(node)
}

/// Whether an `add` path of pass 1 adds a whole container (or the whole
/// container list), as opposed to a field.
pub(super) fn adds_container(path: &str) -> bool {
    ["/spec/containers", "/spec/initContainers"]
        .iter()
        .any(|list| {
            path.strip_prefix(list).is_some_and(|rest| {
                rest.is_empty()
                    || rest
                        .strip_prefix('/')
                        .is_some_and(|i| i.chars().all(|c| c.is_ascii_digit()))
            })
        })
}

/// KServe copies the first container's securityContext into the agent at
/// injection time, before the modelcar step sets `runAsUser` on it; an agent
/// re-created later copies the updated one, and no pass can know the old one.
pub(super) fn forget_agent_security_context(pod: &mut Value) {
    if let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for c in containers.iter_mut().filter(|c| c["name"] == "agent") {
            if let Some(obj) = c.as_object_mut() {
                obj.remove("securityContext");
            }
        }
    }
}

/// KServe HEAD copies queue-proxy's env into the agent as it is at injection
/// time; an agent re-created later copies it as it is by then (`USER_PORT`
/// already pointing at the agent, the aggregator's variables added).
pub(super) fn forget_agent_env_from_queue_proxy(pod: &mut Value) {
    let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    if !containers
        .iter()
        .any(|c| c["name"] == QUEUE_PROXY_CONTAINER)
    {
        return;
    }
    for c in containers.iter_mut().filter(|c| c["name"] == "agent") {
        if let Some(obj) = c.as_object_mut() {
            obj.remove("env");
        }
    }
}

/// A webhook removes one thing pass 1 added (a whole container when
/// `containers`, else a field); the next pass may put it back but must not
/// produce anything pass 1 did not have, and the pass after it is empty.
pub(super) fn removal(
    case: &Case,
    pick: &Index,
    containers: bool,
    stats: &Stats,
) -> Result<(), String> {
    Stats::bump(&stats.cases);
    let pod = case.parts.render();
    let Ok(first) = run_pass("pass 1", &pod, case)? else {
        Stats::bump(&stats.refused);
        return Ok(());
    };
    let added: Vec<&str> = first
        .patch
        .iter()
        .filter(|op| op.kind == OpKind::Add)
        .map(|op| op.path.as_str())
        .filter(|path| adds_container(path) == containers)
        .collect();
    if added.is_empty() {
        Stats::bump(&stats.skipped);
        return Ok(());
    }
    let removed = added[pick.index(added.len())];
    let remove: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": removed}]))
            .map_err(|e| e.to_string())?;
    let mut damaged = first.pod.clone();
    json_patch::patch(&mut damaged, &remove.0)
        .map_err(|e| format!("cannot remove {removed} from the pass-1 output: {e}"))?;
    let stage = format!("pass after removing {removed}");
    let repaired = must_succeed(&stage, &damaged, case)?;
    let (mut got, mut want) = (normalize(&repaired.pod), normalize(&first.pod));
    for pod in [&mut got, &mut want] {
        forget_agent_security_context(pod);
        forget_agent_env_from_queue_proxy(pod);
    }
    if let Some(bad) = bad_repair(&got, Some(&normalize(&damaged)), Some(&want), "") {
        return Err(format!(
            "{stage}: the pass wrote {bad} = {}, but pass 1 had {}\npatch: {}",
            lookup(&got, &bad).map_or_else(|| "?".to_string(), compact),
            lookup(&want, &bad).map_or_else(|| "nothing there".to_string(), compact),
            compact(&repaired.patch)
        ));
    }
    if got == want {
        Stats::bump(&stats.repaired);
    } else {
        Stats::bump(&stats.unrepaired);
    }
    let settled = must_succeed(&format!("{stage}, then again"), &repaired.pod, case)?;
    check_empty(&format!("{stage}, then again"), &settled)
}

pub(super) fn removal_property(name: &str, property: u16, cases: u32, containers: bool) {
    let stats = Stats::default();
    run_per_mode(
        name,
        property,
        cases,
        |profile| (case(profile), any::<Index>()),
        |_, (c, pick)| removal(&c, &pick, containers, &stats).map_err(fail),
    );
    report(
        name,
        &stats,
        &[
            ("with nothing of that kind to remove", &stats.skipped),
            ("fully repaired", &stats.repaired),
            (
                "repaired in part or not at all (injector guards)",
                &stats.unrepaired,
            ),
        ],
    );
}

#[test]
pub(super) fn removed_field_is_repaired_without_side_effects() {
    removal_property(
        "removed_field_is_repaired_without_side_effects",
        2,
        FIELD_REMOVAL_CASES,
        false,
    );
}

#[test]
pub(super) fn removed_container_is_repaired_without_side_effects() {
    removal_property(
        "removed_container_is_repaired_without_side_effects",
        4,
        CONTAINER_REMOVAL_CASES,
        true,
    );
}
