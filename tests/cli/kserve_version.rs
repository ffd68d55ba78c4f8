//! `--kserve-version` on `mutate`, `audit` and `default-config`, and the
//! settings file's `kserveVersion` key: the spellings (a tag, or a minor
//! alone for the last patch release of its line), the refusals, a
//! LocalModel pod under v0.17 and HEAD, the logger's metadata annotations
//! under v0.15.0 and v0.15.1, and each release's shipped ConfigMap as the
//! defaults without `--config` (the goldens under `fixtures/releases/`
//! hold every difference).

use std::path::Path;

fn fixture(case: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(case)
        .join("input.yaml")
        .to_string_lossy()
        .into_owned()
}

/// The LocalModel PVC subPath `mutate` gives the s30a pod with `flags`.
fn local_model_sub_path(flags: &[&str]) -> Result<String, String> {
    let input = fixture("s30a-local-model-root");
    let mut args = vec!["mutate", "-o", "json"];
    args.extend_from_slice(flags);
    args.push(&input);
    let out = crate::run_bin(&args, b"");
    if out.status.code() != Some(0) {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON pod");
    let mount = &pod["spec"]["containers"][0]["volumeMounts"][0];
    Ok(mount["subPath"].as_str().unwrap_or_default().to_string())
}

#[test]
fn every_spelling_selects_the_release_and_head_is_the_default() {
    for spelling in [
        "v0.17", "v0.17.0", "v0.17.1", "0.17", "0.17.1", "v0.16", "v0.15", "0.15", "v0.15.0",
        "v0.15.1", "0.15.2",
    ] {
        let got = local_model_sub_path(&["--kserve-version", spelling]);
        assert_eq!(got.as_deref(), Ok("models/bar/"), "{spelling}");
    }
    for flags in [
        &[][..],
        &["--kserve-version", "head"],
        &["--kserve-version", "HEAD"],
        &["--kserve-version", "v0.18"],
        &["--kserve-version", "v0.18.1"],
    ] {
        let got = local_model_sub_path(flags);
        assert_eq!(got.as_deref(), Ok("models/83fbff445b51876f/"), "{flags:?}");
    }
}

#[test]
fn unknown_releases_are_refused_with_the_supported_list() {
    for (spelling, says) in [
        ("v0.14", "\"v0.14\" is not a KServe version"),
        ("v0.9", "\"v0.9\" is not a KServe version"),
        ("latest", "\"latest\" is not a KServe version"),
        ("v0.15.3", "\"v0.15.3\" is not a KServe version"),
    ] {
        let err = local_model_sub_path(&["--kserve-version", spelling]).unwrap_err();
        assert!(err.contains(says), "{spelling}: {err}");
        assert!(err.contains(LIST), "{spelling}: {err}");
        assert!(
            err.contains("a minor alone, such as v0.15, names the last patch release of that line, v0.15.2, and v0.15.0 the first"),
            "{spelling}: {err}"
        );
    }
    let input = fixture("s30a-local-model-root");
    let out = crate::run_bin(&["mutate", "--kserve-version", "v0.14", &input], b"");
    assert_eq!(out.status.code(), Some(2));
    let out = crate::run_bin(
        &["audit", "--kserve-version", "v0.14", "--objects", &input],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a KServe version"));
}

const LIST: &str =
    "v0.15.0, v0.15.1, v0.15.2, v0.16.0, v0.17.0, v0.17.1, v0.18.0, v0.18.1, v0.19.0, v0.20.0, head";

#[test]
fn only_the_documented_spellings_name_a_release_on_every_path() {
    let near = [" v0.17", "V0.17", "v0.17.3", "0.17.00", "0.15.3", "Head"];
    let list = LIST;
    for spelling in near {
        let err = local_model_sub_path(&["--kserve-version", spelling]).unwrap_err();
        let says = format!("{spelling:?} is not a KServe version");
        assert!(
            err.contains(&says) && err.contains(list),
            "{spelling}: {err}"
        );
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for spelling in near {
        let settings = dir.path().join("settings.yaml");
        std::fs::write(&settings, format!("kserveVersion: {spelling:?}\n")).expect("written");
        let settings = settings.to_string_lossy().into_owned();
        let err = local_model_sub_path(&["--config-file", &settings]).unwrap_err();
        let says = format!("kserveVersion: {spelling:?} is not a KServe version");
        assert!(
            err.contains(&says) && err.contains(list),
            "{spelling}: {err}"
        );
    }
    // The environment variable `serve` reads the flag from.
    for spelling in near {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .args(["serve", "--self-signed", "--addr", "127.0.0.1:0"])
            .args(["--admin-addr", "127.0.0.1:0"])
            .env("KSERVE_INJECTOR_KSERVE_VERSION", spelling)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("binary starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("waitable") {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let mut err = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        }
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(2),
            "{spelling:?} served: {err}"
        );
        assert!(err.contains("is not a KServe version"), "{spelling}: {err}");
    }
}

#[test]
fn the_settings_key_selects_the_release_and_the_flag_wins() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, "kserveVersion: v0.17.1\n").expect("written");
    let settings = settings.to_string_lossy().into_owned();
    let keyed = local_model_sub_path(&["--config-file", &settings]);
    assert_eq!(keyed.as_deref(), Ok("models/bar/"));
    let flagged = local_model_sub_path(&["--config-file", &settings, "--kserve-version", "head"]);
    assert_eq!(flagged.as_deref(), Ok("models/83fbff445b51876f/"));
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "kserveVersion: v0.14\n").expect("written");
    let bad = bad.to_string_lossy().into_owned();
    let err = local_model_sub_path(&["--config-file", &bad]).unwrap_err();
    assert!(
        err.contains(&bad) && err.contains("kserveVersion") && err.contains("not a KServe version"),
        "{err}"
    );
}

#[test]
fn a_kserve_version_key_in_the_configmap_is_ignored() {
    // KServe's ConfigMap holds KServe's keys only; KServe ignores this one.
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = kserve_injector_core::config::Config::default_manifest().replacen(
        "\ndata:\n",
        "\ndata:\n  kserveVersion: v0.17.0\n",
        1,
    );
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, manifest).expect("written");
    let config = config.to_string_lossy().into_owned();
    let got = local_model_sub_path(&["--config", &config]);
    assert_eq!(got.as_deref(), Ok("models/83fbff445b51876f/"));
}

#[test]
fn help_names_the_flag_on_every_command() {
    for command in ["mutate", "audit", "serve", "default-config"] {
        let out = crate::run_bin(&[command, "--help"], b"");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("--kserve-version <VERSION>"),
            "{command}:\n{help}"
        );
    }
}

#[test]
fn what_the_release_lacks_is_logged_at_debug_on_stderr() {
    let input = fixture("m12-native-explicit-mode");
    let run = |log: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kserve-injector"));
        cmd.args(["mutate", "-o", "patch", "--kserve-version", "v0.19", &input]);
        match log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        let out = cmd.output().expect("binary runs");
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let debug = run(Some("kserve_injector=debug"));
    assert!(
        debug.contains("KServe v0.19.0 has no URI scheme oci+native://"),
        "{debug}"
    );
    assert!(run(None).is_empty());
}

#[test]
fn default_config_prints_each_releases_shipped_configmap() {
    use kserve_injector_core::{config::Config, release::Release};
    for release in Release::SUPPORTED {
        let out = crate::run_bin(
            &["default-config", "--kserve-version", release.as_str()],
            b"",
        );
        assert_eq!(out.status.code(), Some(0), "{release}");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(printed, Config::shipped_manifest(*release), "{release}");
    }
    let head = crate::run_bin(&["default-config"], b"");
    assert_eq!(
        String::from_utf8_lossy(&head.stdout),
        Config::shipped_manifest(Release::Head)
    );
    let printed = |version: &str| {
        let out = crate::run_bin(&["default-config", "--kserve-version", version], b"");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for version in ["v0.15.0", "v0.15.1"] {
        let text = printed(version);
        assert!(text.contains(&format!("at tag {version}")), "{text}");
        assert!(text.contains("\"enableModelcar\": false") && !text.contains("uidModelcar"));
    }
    // A minor alone is its last patch release: v0.15.2 shipped the modelcar on.
    let v0_15 = printed("v0.15");
    assert_eq!(v0_15, printed("v0.15.2"));
    assert!(v0_15.contains("at tag v0.15.2"), "{v0_15}");
    assert!(v0_15.contains("\"enableModelcar\": true") && v0_15.contains("\"uidModelcar\": 1010"));
    assert!(printed("v0.17").contains("at tag v0.17.1"));
    let out = crate::run_bin(&["default-config", "--kserve-version", "v0.14"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a KServe version"));
}

#[test]
fn without_config_a_release_uses_what_default_config_prints_for_it() {
    // KServe v0.15.0 shipped `enableModelcar: false`: an OCI model is
    // downloaded by the storage-initializer, no modelcar.
    let dir = tempfile::tempdir().expect("temp dir");
    let input = fixture("m3-modelcar-oci");
    let mutate = |extra: &[&str]| {
        let mut args = vec!["mutate", "-o", "json", "--kserve-version", "v0.15.0"];
        args.extend_from_slice(extra);
        args.push(&input);
        let out = crate::run_bin(&args, b"");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON pod")
    };
    let built_in = mutate(&[]);
    let init = &built_in["spec"]["initContainers"][0];
    assert_eq!(init["name"], "storage-initializer");
    assert_eq!(init["args"][0], "oci://myrepo/mymodelimage");
    assert_eq!(
        built_in["spec"]["containers"].as_array().map(Vec::len),
        Some(1)
    );
    let printed = crate::run_bin(&["default-config", "--kserve-version", "v0.15.0"], b"");
    let config = dir.path().join("v0.15.0.yaml");
    std::fs::write(&config, &printed.stdout).expect("written");
    let config = config.to_string_lossy().into_owned();
    assert_eq!(mutate(&["--config", &config]), built_in);
}

/// The modelcar `mutate` gives the OCI fixture without `--config`: each
/// release's shipped ConfigMap decides (kserve#4316 turned it on in v0.15.2,
/// with `uidModelcar: 1010`).
#[test]
fn v0_15_2_without_config_gives_the_modelcar_running_as_1010() {
    let input = fixture("m3-modelcar-oci");
    let pod = |version: &str| {
        let out = crate::run_bin(
            &["mutate", "-o", "json", "--kserve-version", version, &input],
            b"",
        );
        assert_eq!(out.status.code(), Some(0), "{version}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON pod")
    };
    for version in ["v0.15.2", "v0.15", "head"] {
        let pod = pod(version);
        let modelcar = (pod["spec"]["containers"]
            .as_array()
            .expect("containers")
            .iter())
        .find(|c| c["name"] == "modelcar")
        .unwrap_or_else(|| panic!("{version}: no modelcar"));
        assert_eq!(modelcar["securityContext"]["runAsUser"], 1010, "{version}");
        assert_eq!(pod["spec"]["shareProcessNamespace"], true, "{version}");
    }
    for version in ["v0.15.0", "v0.15.1"] {
        let pod = pod(version);
        assert_eq!(
            pod["spec"]["initContainers"][0]["name"], "storage-initializer",
            "{version}"
        );
        assert_eq!(
            pod["spec"]["containers"].as_array().map(Vec::len),
            Some(1),
            "{version}"
        );
    }
}

/// The agent's arguments `mutate` gives the logger pod of the issue
/// (`team,absent` listed, `team: ml` set) under `version`.
fn agent_args(version: &str) -> Vec<String> {
    let input = fixture("a23-logger-metadata-annotations-one-absent");
    let out = crate::run_bin(
        &["mutate", "-o", "json", "--kserve-version", version, &input],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{version}");
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON pod");
    let agent = (pod["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter())
    .find(|c| c["name"] == "agent")
    .expect("an agent")
    .clone();
    serde_json::from_value(agent["args"].clone()).expect("string args")
}

#[test]
fn the_logger_gets_metadata_annotations_from_v0_15_1_on() {
    let flag = |args: &[String]| {
        let at = args.iter().position(|a| a == "--metadata-annotations")?;
        Some(args[at - 2..at + 3].to_vec())
    };
    for version in ["v0.15.1", "v0.15.2", "v0.15", "v0.16.0", "head"] {
        assert_eq!(
            flag(&agent_args(version)),
            Some(
                [
                    "--component",
                    "predictor",
                    "--metadata-annotations",
                    "team=ml",
                    "--logger-tls-skip-verify"
                ]
                .map(String::from)
                .to_vec()
            ),
            "{version}"
        );
    }
    assert_eq!(flag(&agent_args("v0.15.0")), None);
}

/// Every spelling worth trying: each release's tag with and without the
/// `v`, each minor alone, and near misses.
fn spellings() -> Vec<String> {
    use kserve_injector_core::release::Release;
    let mut out: Vec<String> = ["head", "HEAD", "Head", "latest", "", " v0.15", "V0.15.2"]
        .map(String::from)
        .to_vec();
    for minor in 13..=22 {
        for patch in ["", ".0", ".1", ".2", ".3", ".00", ".1-rc1"] {
            out.push(format!("v0.{minor}{patch}"));
            out.push(format!("0.{minor}{patch}"));
        }
    }
    out.extend(Release::SUPPORTED.iter().map(|r| r.as_str().to_string()));
    out
}

#[test]
fn the_charts_schema_accepts_exactly_the_spellings_the_server_does() {
    use kserve_injector_core::release::Release;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/kserve-injector/values.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the schema")).expect("JSON");
    let server =
        &schema["properties"]["server"]["properties"]["kserveVersion"]["anyOf"][1]["pattern"];
    let settings = &schema["properties"]["settings"]["properties"]["kserveVersion"]["pattern"];
    for pattern in [server, settings] {
        let pattern = regex::Regex::new(pattern.as_str().expect("a pattern")).expect("a regex");
        for text in spellings() {
            assert_eq!(
                pattern.is_match(&text),
                text.parse::<Release>().is_ok(),
                "{text:?}: the chart's schema and --kserve-version disagree"
            );
        }
    }
}

/// The KServe our install docs install, and the `--kserve-version` they
/// set for it: one release this build models, by its exact tag.
#[test]
fn the_kserve_the_docs_install_is_a_release_and_the_docs_name_it() {
    use kserve_injector_core::release::Release;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        "docs/install.md",
        "docs/helm.md",
        "manifests/helm-post-renderer.sh",
        "manifests/helm-post-renderer-plugin/plugin.yaml",
    ];
    let installed = regex::Regex::new(r"charts/kserve --version (\S+)").expect("regex");
    let mut versions = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).expect(file);
        for found in installed.captures_iter(&text) {
            versions.insert(found[1].to_string());
        }
    }
    assert_eq!(
        versions.len(),
        1,
        "one KServe version installed: {versions:?}"
    );
    let version = versions.pop_first().expect("a version");
    let release: Release = version.parse().expect("a modelled release");
    assert_eq!(release.as_str(), version, "the exact tag");
    let install = std::fs::read_to_string(root.join("docs/install.md")).expect("install.md");
    assert!(
        install.contains(&format!("value: --kserve-version={version}")),
        "install.md's patch"
    );
    assert!(
        install.contains(&format!("server.kserveVersion={version}")),
        "install.md's Helm value"
    );
    let helm = std::fs::read_to_string(root.join("docs/helm.md")).expect("helm.md");
    assert!(
        helm.contains(&format!("server.kserveVersion={version}")),
        "helm.md"
    );
}
