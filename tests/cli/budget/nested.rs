//! Anchors nested inside anchored nodes, on every path the reader serves:
//! a reader that kept a copy of each anchored node held about levels² times
//! what the budget counted (1 MB of pod: 1.7 GiB, exit 0). Now a document
//! that fits the budget is read within the bound, one that does not is
//! refused at it, and an alias that would nest past the depth budget is
//! refused (a chain of them once overflowed the stack).

use super::*;
#[path = "../../shared/hostile_yaml.rs"]
mod hostile_yaml;
use hostile_yaml::{data_block, Nested};

const OVER: &str =
    "more than 64 MiB of text in one document (an alias counts each time it is used)";
/// A ConfigMap manifest's budget is smaller (`config::MANIFEST_BUDGET`).
const CONFIG_OVER: &str =
    "more than 4 MiB of text in one document (an alias counts each time it is used)";
/// The rule of `BOUND`, for that budget.
const CONFIG_BOUND: u64 = 4 * MIB + 64 * MIB;

/// `text` written to `name` in `dir`, its path returned.
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    path.to_string_lossy().into_owned()
}

fn fed(text: String) -> impl FnOnce(&mut ChildStdin) -> std::io::Result<()> + Send + 'static {
    move |out| out.write_all(text.as_bytes())
}

#[test]
fn a_pod_whose_anchors_nest_is_mutated_within_the_bound() {
    // 1 MB: 25 levels each aliasing the 1 MB scalar once, 24 MiB in all
    // (within the budget, and small enough that `mutate`'s own copies of
    // the pod stay within the bound too). Kept copies: 650 MiB.
    let nested = Nested {
        levels: 25,
        aliases: 1,
        scalar: 998_000,
        pad: 0,
        again: 0,
    };
    let args = ["mutate", "-"];
    let done = run(&args, fed(nested.pod()));
    assert_eq!(done.code, 0, "{}", done.stderr);
    grew_within(&args, &args, &done, BOUND);
}

#[test]
fn a_pod_whose_nested_anchors_go_past_the_budget_is_refused_at_it() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MB over 29 levels, then aliases of the outermost node past the
    // budget; and 3.85 MB (under serve's 4 MiB file cap), a 1 MB aliased
    // scalar and 2.85 MB of pad.
    let one = Nested::sized(1_000_000, 29, None, true);
    let big = Nested::sized(3_850_000, 29, Some(1_000_000), true);
    for nested in [one, big] {
        let pod = nested.pod();
        let args = ["mutate", "-"];
        refused_within_bound(&args, &run(&args, fed(pod.clone())), OVER, BOUND);
        let path = file(&dir, "pod.yaml", &pod);
        let args = ["mutate", path.as_str()];
        refused_within_bound_of(
            &args,
            &["mutate", "-"],
            &run(&args, fed(String::new())),
            OVER,
            BOUND,
        );
    }
}

#[test]
fn nested_anchors_in_objects_files_are_refused_at_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let nested = Nested::sized(1_000_000, 29, None, true);
    let account = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n  managedFields:\n  - manager: hostile\n    operation: Apply\n    fieldsType: FieldsV1\n    fieldsV1:\n{}",
        nested.entries("      ")
    );
    let objects = file(&dir, "cluster.yaml", &account);
    let args = ["mutate", "--objects", objects.as_str(), "-"];
    let done = run(&args, fed(POD_HEAD.to_string()));
    refused_within_bound_of(&args, &["mutate", "-"], &done, OVER, BOUND);
    let args = ["audit", "--objects", "-"];
    refused_within_bound(&args, &run(&args, fed(nested.pod())), OVER, BOUND);
}

#[test]
fn nested_anchors_in_a_config_or_a_settings_file_are_refused_at_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    // 100 KB of ConfigMap: a reload of 101 KB of it once killed a server
    // held to 128 MiB.
    let nested = Nested::sized(100_000, 29, None, true);
    let data = data_block(kserve_injector_core::config::Config::default_manifest());
    let config = file(&dir, "config.yaml", &nested.config_map(&data));
    let args = ["mutate", "--config", config.as_str(), "-"];
    let done = run(&args, fed(POD_HEAD.to_string()));
    refused_within_bound_of(&args, &["mutate", "-"], &done, CONFIG_OVER, CONFIG_BOUND);

    let settings = Nested::sized(1_000_000, 27, None, true).settings();
    let settings = file(&dir, "settings.yaml", &settings);
    let args = ["mutate", "--config-file", settings.as_str(), "-"];
    let done = run(&args, fed(POD_HEAD.to_string()));
    refused_within_bound_of(&args, &["mutate", "-"], &done, OVER, BOUND);
    // `serve` reads the settings file at start, and refuses to start.
    let args = [
        "serve",
        "--self-signed",
        "--addr",
        "127.0.0.1:0",
        "--admin-addr",
        "127.0.0.1:0",
        "--config-file",
        settings.as_str(),
    ];
    let done = run(&args, fed(String::new()));
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains(OVER), "{}", done.stderr);
    grew_within(&args, &["mutate", "-"], &done, BOUND);
}

#[test]
fn a_nested_anchor_fitting_the_budget_is_read_from_a_config_within_the_bound() {
    // Within a ConfigMap manifest's budget (4 MiB): the config is read, and
    // only its data kept.
    let dir = tempfile::tempdir().unwrap();
    let nested = Nested::expanding(100_000, 29, None, false, 3 << 20);
    assert!(nested.expands_to() > 2 << 20 && nested.expands_to() < 4 << 20);
    let data = data_block(kserve_injector_core::config::Config::default_manifest());
    let config = file(&dir, "config.yaml", &nested.config_map(&data));
    let args = ["mutate", "--config", config.as_str(), "-"];
    let done = run(&args, fed(POD_HEAD.to_string()));
    assert_eq!(done.code, 0, "{}", done.stderr);
    grew_within(&args, &["mutate", "-"], &done, CONFIG_BOUND);
}

#[test]
fn an_alias_that_would_nest_past_the_depth_budget_is_refused() {
    // 2,000 anchors, each 50 levels deep around an alias to the one before:
    // 100,000 levels once placed, from 290 KB (once a stack overflow).
    let mut pod = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: deep\n  managedFields:\n  - manager: hostile\n    fieldsType: FieldsV1\n    fieldsV1:\n");
    let mut previous = "0".to_string();
    for i in 0..2000 {
        pod.push_str(&format!(
            "      l{i}: &d{i} {}{previous}{}\n",
            "[".repeat(50),
            "]".repeat(50)
        ));
        previous = format!("*d{i}");
    }
    let args = ["mutate", "-"];
    let done = run(&args, fed(pod));
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert_eq!(
        done.stderr,
        "error: document 1: not valid YAML or JSON: nested deeper than 64 levels at line 10 column 65\n"
    );
}
