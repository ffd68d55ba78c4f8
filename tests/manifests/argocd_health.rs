//! The Argo CD health check for InferenceService (manifests/argocd/inferenceservice-health.lua),
//! run the way Argo CD runs it: in a Lua 5.1 VM (mlua with vendored PUC Lua 5.1.5; Argo CD
//! embeds gopher-lua, also Lua 5.1) holding only the base and table libraries (Argo CD's
//! health VM opens base, table, package and a reduced os; no string or math library),
//! with the object as the global `obj` (maps as tables, lists as 1-based tables, null as
//! nil), and the table the chunk returns read as {status, message}, where status must be
//! one of the health codes Argo CD accepts.
//!
//! fixtures/argocd/cases.yaml lists every input and its expected result: Argo CD's 11
//! published cases for its built-in check (expected = the built-in's output) and ours.
//! `ARGOCD_HEALTH_LUA=/path/to/other.lua` runs the same cases against another script, and
//! `broken_copies_of_the_script_fail_the_cases` shows that mutated copies fail them.
//!
//! The manifests that ship the script and the webhook to Argo CD are checked in
//! `argocd_health/manifests.rs` (a child module).

use std::collections::BTreeSet;
use std::path::PathBuf;

use mlua::{Lua, LuaOptions, StdLib, Table, Value};
use serde::Deserialize;
use serde_json::Value as Json;

const SCRIPT_OVERRIDE: &str = "ARGOCD_HEALTH_LUA";
/// Argo CD turns any other status into Unknown, "Lua returned an invalid health status".
const HEALTH_CODES: [&str; 6] = [
    "Healthy",
    "Progressing",
    "Degraded",
    "Suspended",
    "Missing",
    "Unknown",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("fixtures/argocd")
}

fn script_path() -> PathBuf {
    match std::env::var_os(SCRIPT_OVERRIDE) {
        Some(path) => PathBuf::from(path),
        None => root().join("manifests/argocd/inferenceservice-health.lua"),
    }
}

fn script() -> String {
    let path = script_path();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Index {
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    input: String,
    status: String,
    message: String,
    /// What Argo CD's built-in does on this input (documentation only).
    #[serde(default)]
    builtin: Option<String>,
}

impl Case {
    fn is_argo_cd_case(&self) -> bool {
        self.input.starts_with("argo-cd/")
    }
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.yaml")).expect("read cases.yaml");
    let index: Index = serde_json::from_value(yaml_value(&text)).expect("parse cases.yaml");
    index.cases
}

/// The first document of a YAML text, read by the core's reader.
fn yaml_value(text: &str) -> Json {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|mut docs| docs.next().unwrap_or(Ok(Json::Null)))
        .expect("YAML")
}

fn load_object(input: &str) -> Json {
    let path = fixtures().join(input);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|mut docs| docs.next().unwrap_or(Ok(Json::Null)))
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The object as Argo CD hands it to Lua: objects and arrays become tables (arrays 1-based),
/// numbers become Lua numbers (gopher-lua has only float64), null becomes nil.
fn to_lua(lua: &Lua, value: &Json) -> mlua::Result<Value> {
    Ok(match value {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let table = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
        Json::Object(fields) => {
            let table = lua.create_table()?;
            for (key, item) in fields {
                table.raw_set(key.as_str(), to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

fn global_names(lua: &Lua) -> mlua::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for pair in lua.globals().pairs::<Value, Value>() {
        let (key, _) = pair?;
        if let Value::String(s) = key {
            names.insert(s.to_string_lossy());
        }
    }
    Ok(names)
}

#[derive(Debug, PartialEq)]
struct Health {
    status: String,
    message: String,
}

/// Runs `script` on `obj` in a fresh VM. A Lua error, a non-table result or a missing
/// field is an Err carrying Lua's text; so is a script that leaves globals behind (Argo CD
/// may reuse a VM between objects).
fn evaluate(script: &str, obj: &Json) -> Result<Health, String> {
    let lua = Lua::new_with(StdLib::TABLE, LuaOptions::default()).map_err(|e| e.to_string())?;
    lua.globals()
        .set("obj", to_lua(&lua, obj).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let before = global_names(&lua).map_err(|e| e.to_string())?;
    let result: Table = lua
        .load(script)
        .set_name("inferenceservice-health.lua")
        .eval()
        .map_err(|e| e.to_string())?;
    let after = global_names(&lua).map_err(|e| e.to_string())?;
    let leaked: Vec<_> = after.difference(&before).collect();
    if !leaked.is_empty() {
        return Err(format!("script set globals {leaked:?}"));
    }
    let field = |name: &str| -> Result<String, String> {
        result
            .get::<Option<String>>(name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("result has no {name}"))
    };
    let status = field("status")?;
    if !HEALTH_CODES.contains(&status.as_str()) {
        return Err(format!("{status:?} is not a health status Argo CD accepts"));
    }
    Ok(Health {
        status,
        message: field("message")?,
    })
}

/// Runs the cases through `script`; returns one line per case that does not give its
/// expected result.
fn failures(script: &str, cases: &[&Case]) -> Vec<String> {
    let mut failed = Vec::new();
    for case in cases {
        let expected = Health {
            status: case.status.clone(),
            message: case.message.clone(),
        };
        match evaluate(script, &load_object(&case.input)) {
            Ok(got) if got == expected => {}
            Ok(got) => failed.push(format!(
                "{}: got {:?} / {:?}, want {:?} / {:?}",
                case.input, got.status, got.message, expected.status, expected.message
            )),
            Err(e) => failed.push(format!("{}: error: {e}", case.input)),
        }
    }
    failed
}

#[test]
fn argo_cd_builtin_cases_all_give_the_builtin_result() {
    let all = cases();
    let builtin: Vec<&Case> = all.iter().filter(|c| c.is_argo_cd_case()).collect();
    assert_eq!(
        builtin.len(),
        11,
        "Argo CD publishes 11 cases for its built-in check"
    );
    let failed = failures(&script(), &builtin);
    assert!(
        failed.is_empty(),
        "{}/11 built-in cases differ ({}):\n{}",
        failed.len(),
        script_path().display(),
        failed.join("\n")
    );
}

#[test]
fn our_cases_pass() {
    let all = cases();
    let ours: Vec<&Case> = all.iter().filter(|c| !c.is_argo_cd_case()).collect();
    assert!(ours.len() >= 10, "only {} cases of our own", ours.len());
    for case in &ours {
        assert!(
            case.builtin.is_some(),
            "{}: say what the built-in does",
            case.input
        );
    }
    let failed = failures(&script(), &ours);
    assert!(
        failed.is_empty(),
        "{}/{} of our cases fail ({}):\n{}",
        failed.len(),
        ours.len(),
        script_path().display(),
        failed.join("\n")
    );
}

#[test]
fn every_fixture_is_listed_once_and_is_an_inference_service() {
    let listed: Vec<String> = cases().into_iter().map(|c| c.input).collect();
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "a fixture is listed twice");
    let mut on_disk = BTreeSet::new();
    for dir in ["argo-cd", "ours"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).expect("read fixture dir") {
            let name = entry.expect("dir entry").file_name();
            on_disk.insert(format!("{dir}/{}", name.to_string_lossy()));
        }
    }
    let listed: BTreeSet<String> = listed.into_iter().collect();
    assert_eq!(listed, on_disk, "cases.yaml and fixtures/argocd/ disagree");
    for input in &listed {
        let obj = load_object(input);
        assert_eq!(obj["kind"], "InferenceService", "{input}");
        assert_eq!(obj["apiVersion"], "serving.kserve.io/v1beta1", "{input}");
    }
}

/// Each mutation breaks one behaviour the cases pin down; every mutated copy must fail
/// at least one case, so the cases cannot pass for a script that does not do the job.
#[test]
fn broken_copies_of_the_script_fail_the_cases() {
    const MUTATIONS: &[(&str, &str, &str)] = &[
        (
            "deletion ignored",
            "if meta.deletionTimestamp ~= nil then",
            "if false then",
        ),
        (
            "finalizers not named",
            "\"; blocked by finalizers: \"",
            "\"; finalizers: \"",
        ),
        (
            "terminal reasons ignored",
            "elseif degraded or (ready_false and terminal) then",
            "elseif degraded then",
        ),
        (
            "RevisionMissing taken as terminal",
            "RevisionFailed = true,",
            "RevisionFailed = true, RevisionMissing = true,",
        ),
        (
            "Ready not required to be False",
            "local ready_false = false",
            "local ready_false = true",
        ),
        (
            "ProgressDeadlineExceeded dropped",
            "ProgressDeadlineExceeded = true,",
            "",
        ),
        ("FailedCreate dropped", "FailedCreate = true,", ""),
        (
            "missing transitionStatus treated as a transition",
            "if transition ~= nil and transition ~= \"\" then",
            "if true then",
        ),
        (
            "FailedToLoad model state ignored",
            "elseif states.targetModelState == \"FailedToLoad\"",
            "elseif false and states.targetModelState == \"FailedToLoad\"",
        ),
        (
            "failed model without conditions waits",
            "  if degraded then\n    health.status = \"Degraded\"",
            "  if false then\n    health.status = \"Degraded\"",
        ),
        (
            "Stopped not suspended",
            "if is_stopped and condition.status == \"True\" then",
            "if false then",
        ),
        (
            "Stopped=False counted as a failure",
            "local is_stopped = condition.type == \"Stopped\"",
            "local is_stopped = false",
        ),
        (
            "InProgress read as a failure",
            "if transition == \"InProgress\" then",
            "if transition == \"Progressing\" then",
        ),
        (
            "condition separator changed",
            "\" | \" .. i .. \": \"",
            "\" | \" .. i .. \":\"",
        ),
        (
            "healthy message changed",
            "\"InferenceService is healthy.\"",
            "\"Inference Service is healthy.\"",
        ),
        (
            "nil fields concatenated as the built-in does",
            "text(condition.type) .. \" | \" .. text(condition.status)",
            "condition.type .. \" | \" .. condition.status",
        ),
        ("a global leaks", "local health = {", "health = {"),
        (
            "string library used (Argo CD does not open it)",
            "  return tostring(value)",
            "  return string.format(\"%s\", tostring(value))",
        ),
        ("invalid health code", "\"Suspended\"", "\"Stopped\""),
    ];
    let original = script();
    let all = cases();
    let every: Vec<&Case> = all.iter().collect();
    assert!(
        failures(&original, &every).is_empty(),
        "the unmutated script must pass"
    );
    let mut survivors = Vec::new();
    for (what, from, to) in MUTATIONS {
        assert_eq!(
            original.matches(from).count(),
            1,
            "mutation {what:?}: {from:?} must occur exactly once in the script"
        );
        let broken = original.replacen(from, to, 1);
        let failed = failures(&broken, &every);
        println!("mutation {what:?}: {} case(s) fail", failed.len());
        for line in &failed {
            println!("    {line}");
        }
        if failed.is_empty() {
            survivors.push(*what);
        }
    }
    assert!(
        survivors.is_empty(),
        "mutated scripts passed every case: {survivors:?}"
    );
}

mod manifests;
