use super::*;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const RES: &str =
    r#""memoryRequest":"100Mi","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1""#;

fn valid_with(storage: &str) -> BTreeMap<String, String> {
    let all = format!("{{{RES}}}");
    data(&[
        (STORAGE_INITIALIZER_KEY, storage),
        (LOGGER_KEY, &all),
        (BATCHER_KEY, &all),
        (AGENT_KEY, &all),
    ])
}

#[test]
fn default_is_kserve_shipped_configmap() {
    let c = Config::default();
    assert_eq!(
        c.storage_initializer.image,
        "kserve/storage-initializer:latest"
    );
    assert_eq!(c.storage_initializer.oci_mode(), "modelcar");
    assert_eq!(c.storage_initializer.uid_modelcar, Some(1010));
    assert_eq!(c.storage_initializer.resources.cpu_limit, "1");
    assert_eq!(c.agent.image, "kserve/agent:latest");
    assert_eq!(c.logger.default_url, "http://default-broker");
    assert_eq!(c.metrics_aggregator.enable_metric_aggregation, "false");
    assert_eq!(
        c.credentials.storage_secret_name_annotation,
        "serving.kserve.io/storageSecretName"
    );
}

#[test]
fn s36_invalid_memory_request_is_rejected_with_kserve_message() {
    let storage =
        r#"{"MemoryRequest":"200MC","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1"}"#;
    let err = Config::from_data(&valid_with(storage)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to parse resource configuration for \"storageInitializer\".\"memoryRequest\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

#[test]
fn s36_modelcar_quantities_are_checked_only_when_set() {
    let bad = format!("{{{RES},\"CpuModelcar\":\"invalid\"}}");
    let err = Config::from_data(&valid_with(&bad)).unwrap_err();
    assert!(err.to_string().starts_with(
        "failed to parse resource configuration for \"storageInitializer\".\"cpuModelcar\""
    ));
    let empty = format!("{{{RES},\"cpuModelcar\":\"\"}}");
    assert!(Config::from_data(&valid_with(&empty)).is_ok());
    assert!(Config::from_data(&valid_with(&format!("{{{RES}}}"))).is_ok());
}

#[test]
fn f3_oci_mode_resolution() {
    let parse = |extra: &str| {
        Config::from_data(&valid_with(&format!("{{{RES}{extra}}}")))
            .unwrap()
            .storage_initializer
            .oci_mode()
            .to_string()
    };
    assert_eq!(
        parse(r#","enableOciModelSupport":true,"enableModelcar":false"#),
        "modelcar"
    );
    assert_eq!(parse(r#","enableModelcar":true"#), "modelcar");
    assert_eq!(parse(""), "");
    assert_eq!(
        parse(r#","enableModelcar":true,"ociModelMode":"native""#),
        "native"
    );
}

#[test]
fn invalid_oci_mode_is_rejected() {
    let err = Config::from_data(&valid_with(&format!("{{{RES},\"ociModelMode\":\"pull\"}}")))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid \"storageInitializer\".ociModelMode \"pull\": must be one of \"modelcar\", \"native\", \"fetch\""
    );
}

#[test]
fn a18_logger_and_agent_resources_are_validated() {
    let mut d = valid_with(&format!("{{{RES}}}"));
    d.insert(
        LOGGER_KEY.into(),
        r#"{"memoryRequest":"200mc","memoryLimit":"1Gi","cpuRequest":"1","cpuLimit":"1"}"#.into(),
    );
    assert_eq!(
        Config::from_data(&d).unwrap_err().to_string(),
        "Failed to parse resource configuration for \"logger\": \"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'\""
    );
    let mut d = valid_with(&format!("{{{RES}}}"));
    d.insert(
        AGENT_KEY.into(),
        r#"{"memoryRequest":"200mc","memoryLimit":"1Gi","cpuRequest":"1","cpuLimit":"1"}"#.into(),
    );
    assert!(Config::from_data(&d)
        .unwrap_err()
        .to_string()
        .starts_with("failed to parse resource configuration for \"agent\": quantities"));
}

#[test]
fn a18_logger_storage_defaults() {
    let mut d = valid_with(&format!("{{{RES}}}"));
    d.insert(
        LOGGER_KEY.into(),
        format!("{{{RES},\"storage\":{{\"path\":\"/logger\"}}}}"),
    );
    let storage = Config::from_data(&d).unwrap().logger.storage.unwrap();
    assert_eq!(storage.service_account_name, "logger-sa");
    assert_eq!(storage.key, "credentials");
}

#[test]
fn missing_required_section_fails_like_kserve() {
    let mut d = valid_with(&format!("{{{RES}}}"));
    d.remove(AGENT_KEY);
    assert!(Config::from_data(&d)
        .unwrap_err()
        .to_string()
        .starts_with("failed to parse resource configuration for \"agent\""));
}

#[test]
fn invalid_json_names_the_key() {
    let mut d = valid_with(&format!("{{{RES}}}"));
    d.insert(METRICS_AGGREGATOR_KEY.into(), "{not json".into());
    assert!(Config::from_data(&d)
        .unwrap_err()
        .to_string()
        .starts_with("invalid JSON in \"metricsAggregator\""));
}

#[test]
fn quantities_are_canonicalised() {
    let storage =
        r#"{"memoryRequest":"1024Mi","memoryLimit":"1Gi","cpuRequest":"0.5","cpuLimit":"1000m"}"#;
    let c = Config::from_data(&valid_with(storage)).unwrap();
    assert_eq!(c.storage_initializer.resources.memory_request, "1Gi");
    assert_eq!(c.storage_initializer.resources.cpu_request, "500m");
    assert_eq!(c.storage_initializer.resources.cpu_limit, "1");
}

#[test]
fn manifest_must_be_a_configmap() {
    let err = Config::from_manifest("kind: Secret\n").unwrap_err();
    assert!(err.to_string().contains("expected kind ConfigMap"));
}

#[test]
fn settings_defaults_fill_only_what_the_configmap_leaves_out() {
    let defaults = Resources {
        cpu_request: "250m".into(),
        cpu_limit: "2".into(),
        memory_request: "2Gi".into(),
        memory_limit: "4Gi".into(),
    };
    let storage = r#"{"memoryRequest":"100Mi","cpuLimit":"","image":"x"}"#;
    let c = Config::from_data_with(&valid_with(storage), &defaults, Release::Head).unwrap();
    let r = &c.storage_initializer.resources;
    assert_eq!(r.memory_request, "100Mi", "the ConfigMap's value wins");
    assert_eq!(r.cpu_limit, "2", "an empty key takes the default");
    assert_eq!(
        (r.cpu_request.as_str(), r.memory_limit.as_str()),
        ("250m", "4Gi")
    );
    // The other sections never read the storage-initializer defaults.
    assert_eq!(c.agent.resources.cpu_limit, "1");
    // Without a default, a missing key stays KServe's error.
    let missing = Config::from_data(&valid_with(storage)).unwrap_err();
    assert!(missing.to_string().contains("\"memoryLimit\""), "{missing}");
}

#[test]
fn values_every_pod_would_carry_are_refused_at_load_naming_the_key() {
    let prefix = "invalid \"storageInitializer\" configuration: ";
    let modelcar = "; every modelcar container would be made with it";
    let init = "; every storage-initializer container would be made with it";
    // Within the 1 MiB a ConfigMap holds, far past what a quantity may be.
    let half_mb = "1".repeat(1 << 19);
    let cases = [
        (
            format!("{{{RES},\"memoryModelcar\":\"-1\"}}"),
            format!("\"memoryModelcar\": \"-1\" is negative, which the API server refuses{modelcar}"),
        ),
        (
            format!("{{{RES},\"memoryModelcar\":\"1e999999\"}}"),
            format!("\"memoryModelcar\": \"1e999999\" is more than Kubernetes counts (9223372036854775807 bytes){modelcar}"),
        ),
        (
            format!("{{{RES},\"cpuModelcar\":\"-10m\"}}"),
            format!("\"cpuModelcar\": \"-10m\" is negative, which the API server refuses{modelcar}"),
        ),
        (
            format!("{{{RES},\"cpuModelcar\":\"{half_mb}\"}}"),
            format!("\"cpuModelcar\": 524288 characters long, more than the 64 a quantity may have here{modelcar}"),
        ),
        (
            format!("{{{RES},\"uidModelcar\":-1}}"),
            format!("\"uidModelcar\": -1 is not a user ID (0 to 2147483647), which the API server refuses{modelcar}"),
        ),
        (
            format!("{{{RES},\"uidModelcar\":2147483648}}"),
            format!("\"uidModelcar\": 2147483648 is not a user ID (0 to 2147483647), which the API server refuses{modelcar}"),
        ),
        (
            r#"{"memoryRequest":"100Mi","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"-1"}"#
                .to_string(),
            format!("\"cpuLimit\": \"-1\" is negative, which the API server refuses{init}"),
        ),
        (
            r#"{"memoryRequest":"-1Gi","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1"}"#
                .to_string(),
            format!("\"memoryRequest\": \"-1Gi\" is negative, which the API server refuses{init}"),
        ),
        (
            r#"{"memoryRequest":"100Mi","memoryLimit":"1e999999","cpuRequest":"100m","cpuLimit":"1"}"#
                .to_string(),
            format!("\"memoryLimit\": \"1e999999\" is more than Kubernetes counts (9223372036854775807 bytes){init}"),
        ),
    ];
    for (storage, want) in cases {
        for release in [Release::Head, Release::V0_20_0, Release::V0_15_0] {
            let err = Config::from_data_with(&valid_with(&storage), &Resources::default(), release)
                .unwrap_err();
            assert_eq!(err.to_string(), format!("{prefix}{want}"), "{release}");
        }
    }
    // The edges are values every pod may carry.
    for extra in [
        "\"uidModelcar\":0",
        "\"uidModelcar\":2147483647",
        "\"memoryModelcar\":\"0\"",
        "\"memoryModelcar\":\"8Ei\"",
        "\"cpuModelcar\":\"9223372036854775807m\"",
    ] {
        let storage = format!("{{{RES},{extra}}}");
        assert!(Config::from_data(&valid_with(&storage)).is_ok(), "{extra}");
    }
}

#[test]
fn a_config_kserve_refuses_keeps_kserves_message_before_ours() {
    // KServe checks the quantities it parses, and the sections after, first.
    let storage = format!("{{{RES},\"memoryModelcar\":\"-1\",\"cpuModelcar\":\"bogus\"}}");
    let err = Config::from_data(&valid_with(&storage)).unwrap_err();
    assert!(err.to_string().starts_with(
        "failed to parse resource configuration for \"storageInitializer\".\"cpuModelcar\""
    ));
    let mut data = valid_with(&format!("{{{RES},\"uidModelcar\":-1}}"));
    data.insert(AGENT_KEY.into(), "{not json".into());
    let err = Config::from_data(&data).unwrap_err();
    assert!(
        err.to_string().starts_with("invalid JSON in \"agent\""),
        "{err}"
    );
}

#[test]
fn sections_over_what_a_configmap_holds_are_refused_before_they_are_parsed() {
    // A million-element array: parsed, twenty times its text.
    let array = format!("[{}0]", "0,".repeat(1 << 19));
    let mut data = BTreeMap::new();
    data.insert("agent".to_string(), format!("{{\"x\":{array}}}"));
    let err = Config::from_data(&data).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the ConfigMap's credentials, storageInitializer, logger, batcher, agent, \
             metricsAggregator hold {} bytes, more than the 1048576 the API server stores in a \
             whole ConfigMap",
            array.len() + 6
        )
    );
    // Keys the mutator does not read do not count.
    let mut data = valid_with(
        r#"{"memoryRequest":"100Mi","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1"}"#,
    );
    data.insert("explainers".to_string(), array);
    let loaded = Config::from_data(&data);
    assert!(loaded.is_ok(), "{loaded:?}");
}
