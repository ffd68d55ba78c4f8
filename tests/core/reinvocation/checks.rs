//! The cases and the invariants every property checks: (a) the patch,
//! (b) unique names, (d) unknown fields, and the counts.

use super::*;

// Cases
// ---------------------------------------------------------------------------

#[derive(Clone)]
pub(super) struct Case {
    pub(super) parts: PodParts,
    pub(super) env: usize,
    pub(super) namespace: &'static str,
    pub(super) others: Vec<Other>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "env #{} ({}), namespace {:?}",
            self.env,
            env_name(self.env),
            self.namespace
        )?;
        writeln!(f, "other webhooks: {:?}", self.others)?;
        write!(f, "pod: {}", self.parts.render())
    }
}

/// A case in one of `profile`'s environments.
pub(super) fn case(profile: Profile) -> impl Strategy<Value = Case> {
    (
        pod_parts(),
        envs_in(profile),
        prop::sample::select(NAMESPACES.to_vec()),
        prop::collection::vec(other(), 1..4),
    )
        .prop_map(|(parts, env, namespace, others)| Case {
            parts,
            env,
            namespace,
            others,
        })
}

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

pub(super) fn compact(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

pub(super) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `a` is `b` or lies inside it (token boundaries respected).
pub(super) fn within(a: &str, b: &str) -> bool {
    a == b || (a.starts_with(b) && a[b.len()..].starts_with('/'))
}

/// The operations in the form an independent RFC 6902 implementation reads,
/// through their wire form.
pub(super) fn independent(ops: &[Op]) -> Result<json_patch::Patch, String> {
    let wire = serde_json::to_value(ops).map_err(|e| format!("the ops do not serialise: {e}"))?;
    serde_json::from_value(wire).map_err(|e| format!("the ops are not RFC 6902: {e}"))
}

/// (a) The patch applies to the object it was computed for and yields
/// `Mutation.pod`; an empty patch means nothing was injected.
pub(super) fn check_patch(stage: &str, input: &Value, m: &Mutation) -> Result<(), String> {
    let mut applied = input.clone();
    json_patch::patch(&mut applied, &independent(&m.patch)?).map_err(|e| {
        format!(
            "{stage}: (a) the patch does not apply to its input: {e}\npatch: {}",
            compact(&m.patch)
        )
    })?;
    check!(
        applied == m.pod,
        "{stage}: (a) input + patch differs from Mutation.pod\npatch: {}\ninput + patch: {}\nMutation.pod: {}",
        compact(&m.patch),
        applied,
        m.pod
    );
    if m.patch.is_empty() {
        check!(
            m.outcomes
                .iter()
                .all(|(_, o)| *o == InjectorOutcome::Unchanged),
            "{stage}: (a) empty patch but outcomes {:?}",
            m.outcomes
        );
    }
    Ok(())
}

pub(super) fn duplicates<'v>(
    items: Option<&'v Value>,
    seen: &mut BTreeSet<&'v str>,
) -> Option<&'v str> {
    items
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("name").and_then(Value::as_str))
        .find(|n| !seen.insert(n))
}

/// (b) Names are unique: containers and init containers together, volumes,
/// and per container its mounts, env and named ports.
pub(super) fn check_unique(stage: &str, pod: &Value) -> Result<(), String> {
    let spec = &pod["spec"];
    let mut containers = BTreeSet::new();
    for key in ["containers", "initContainers"] {
        if let Some(n) = duplicates(spec.get(key), &mut containers) {
            return Err(format!("{stage}: (b) duplicate container name {n:?}"));
        }
        for c in spec[key].as_array().into_iter().flatten() {
            for field in ["volumeMounts", "env", "ports"] {
                if let Some(n) = duplicates(c.get(field), &mut BTreeSet::new()) {
                    return Err(format!(
                        "{stage}: (b) duplicate {field} entry {n:?} in {key} {:?}",
                        c["name"]
                    ));
                }
            }
        }
    }
    if let Some(n) = duplicates(spec.get("volumes"), &mut BTreeSet::new()) {
        return Err(format!("{stage}: (b) duplicate volume {n:?}"));
    }
    Ok(())
}

/// Every unknown field in `doc`, keyed by a locator that names list entries
/// by their `name` (stable across appends), with its JSON Pointer and value.
pub(super) fn unknowns(doc: &Value) -> BTreeMap<String, (String, Value)> {
    fn walk(v: &Value, locator: &str, pointer: &str, out: &mut BTreeMap<String, (String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let loc = format!("{locator}/{}", escape(k));
                    let ptr = format!("{pointer}/{}", escape(k));
                    if UNKNOWN_KEYS.contains(&k.as_str()) {
                        out.insert(loc, (ptr, child.clone()));
                    } else {
                        walk(child, &loc, &ptr, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let step = match child.get("name").and_then(Value::as_str) {
                        Some(name) => format!("[{name}]"),
                        None => format!("#{i}"),
                    };
                    walk(
                        child,
                        &format!("{locator}/{step}"),
                        &format!("{pointer}/{i}"),
                        out,
                    );
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    walk(doc, "", "", &mut out);
    out
}

/// (d) Unknown fields are present and equal afterwards, and no patch
/// operation writes to, inside, or over one of them.
pub(super) fn check_unknown(stage: &str, input: &Value, m: &Mutation) -> Result<(), String> {
    let before = unknowns(input);
    let after = unknowns(&m.pod);
    for (locator, (pointer, value)) in &before {
        match after.get(locator) {
            Some((_, v)) if v == value => {}
            Some((_, v)) => {
                return Err(format!(
                    "{stage}: (d) unknown field {locator} changed from {value} to {v}"
                ))
            }
            None => return Err(format!("{stage}: (d) unknown field {locator} is gone")),
        }
        for op in &m.patch {
            let path = op.path.as_str();
            check!(
                !within(path, pointer) && !within(pointer, path),
                "{stage}: (d) patch operation {} touches unknown field {pointer}",
                compact(op)
            );
        }
    }
    Ok(())
}

/// Runs one pass and checks (a), (b) and (d).
pub(super) fn run_pass(
    stage: &str,
    input: &Value,
    case: &Case,
) -> Result<Result<Mutation, MutationError>, String> {
    let result = mutate(input, case.namespace, &envs()[case.env]);
    if let Ok(m) = &result {
        check_patch(stage, input, m)?;
        check_unique(stage, &m.pod)?;
        check_unknown(stage, input, m)?;
        check_modelcar_shape(stage, input, m, &envs()[case.env])?;
    }
    Ok(result)
}

fn has_in(pod: &Value, list: &str, name: &str) -> bool {
    (pod["spec"][list].as_array()).is_some_and(|items| has_named(items, name))
}

/// A modelcar the pass added has the shape the rule gives: KServe's
/// `modelcar-init` in the input means classic; else the pod's annotation,
/// else the environment's mode. A native-sidecar modelcar is an init
/// container with `restartPolicy: Always` and a startup probe, and never
/// comes with a `modelcar-init`.
pub(super) fn check_modelcar_shape(
    stage: &str,
    input: &Value,
    m: &Mutation,
    inputs: &Inputs,
) -> Result<(), String> {
    let classic = has_in(&m.pod, "containers", MODELCAR_CONTAINER);
    let native = has_in(&m.pod, "initContainers", MODELCAR_CONTAINER);
    let before = has_in(input, "containers", MODELCAR_CONTAINER)
        || has_in(input, "initContainers", MODELCAR_CONTAINER);
    if before || !(classic || native) {
        return Ok(());
    }
    let annotation = input["metadata"]["annotations"][MODELCAR_MODE_ANNOTATION].as_str();
    let want = if has_in(input, "initContainers", MODELCAR_INIT_CONTAINER) {
        ModelcarMode::Classic
    } else if let Some(text) = annotation {
        text.parse()
            .map_err(|e| format!("{stage}: a modelcar added despite the annotation: {e}"))?
    } else {
        inputs.modelcar_mode
    };
    let got = if native {
        ModelcarMode::NativeSidecar
    } else {
        ModelcarMode::Classic
    };
    check!(
        got == want,
        "{stage}: the modelcar was added as {got}, the rule gives {want}"
    );
    if native {
        let items = m.pod["spec"]["initContainers"].as_array();
        let sidecar = items
            .and_then(|items| items.iter().find(|c| c["name"] == MODELCAR_CONTAINER))
            .cloned()
            .unwrap_or_default();
        check!(
            sidecar["restartPolicy"] == "Always" && sidecar["startupProbe"].is_object(),
            "{stage}: a native-sidecar modelcar without restartPolicy Always or a startupProbe: {}",
            compact(&sidecar)
        );
        check!(
            !has_in(&m.pod, "initContainers", MODELCAR_INIT_CONTAINER),
            "{stage}: modelcar-init added beside a native-sidecar modelcar"
        );
    }
    Ok(())
}

/// (e) A pass after a successful pass does not fail.
pub(super) fn must_succeed(stage: &str, input: &Value, case: &Case) -> Result<Mutation, String> {
    run_pass(stage, input, case)?
        .map_err(|e| format!("{stage}: (e) failed on the output of a successful pass: {e}"))
}

/// (c) The pass changed nothing.
pub(super) fn check_empty(stage: &str, m: &Mutation) -> Result<(), String> {
    check!(
        m.patch.is_empty(),
        "{stage}: (c) expected an empty patch, got {}",
        compact(&m.patch)
    );
    Ok(())
}

#[derive(Default)]
pub(super) struct Stats {
    pub(super) cases: AtomicUsize,
    pub(super) refused: AtomicUsize,
    pub(super) unlabelled: AtomicUsize,
    pub(super) injected: AtomicUsize,
    pub(super) triggered: AtomicUsize,
    pub(super) native_sidecars: AtomicUsize,
    pub(super) repaired: AtomicUsize,
    pub(super) unrepaired: AtomicUsize,
    pub(super) skipped: AtomicUsize,
    pub(super) injected_by: std::sync::Mutex<BTreeMap<&'static str, usize>>,
}

impl Stats {
    pub(super) fn bump(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

pub(super) fn report(name: &str, stats: &Stats, extra: &[(&str, &AtomicUsize)]) {
    let mut line = format!(
        "proptest {name}: {} cases, {} refused by the core",
        Stats::get(&stats.cases),
        Stats::get(&stats.refused)
    );
    for (label, counter) in extra {
        line.push_str(&format!(", {} {label}", Stats::get(counter)));
    }
    if let Ok(by) = stats.injected_by.lock() {
        if !by.is_empty() {
            line.push_str(&format!("; pass 1 injected by: {by:?}"));
        }
    }
    println!("{line}");
}
