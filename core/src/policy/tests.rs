use super::*;
use crate::config::Config;
use crate::pod::apply_all;
use proptest::prelude::*;

fn inputs(aggregate: &str, scrape: &str) -> Inputs {
    let mut config = Config::default();
    config.metrics_aggregator.enable_metric_aggregation = aggregate.into();
    config.metrics_aggregator.enable_prometheus_scraping = scrape.into();
    Inputs::new(config)
}

/// Every `…_ANNOTATION` constant of `constants.rs` is either a trigger or
/// one the core only writes: a new annotation fails this test until it is
/// classified, so the share never grows by forgetting one.
#[test]
fn the_trigger_list_names_every_annotation_constant() {
    let source = include_str!("../constants.rs");
    let declared: Vec<&str> = (source.lines())
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line
                .strip_prefix("pub const ")
                .or_else(|| line.strip_prefix("pub(crate) const "))?;
            let name = rest.split(':').next()?;
            name.ends_with("_ANNOTATION").then_some(name)
        })
        .collect();
    assert!(declared.len() > 30, "constants.rs read as {declared:?}");
    let classified: Vec<&str> = (TRIGGERS.iter().chain(WRITTEN_ONLY))
        .map(|(n, _)| *n)
        .collect();
    for name in &declared {
        assert!(
            classified.contains(name),
            "{name} is neither a trigger nor written only"
        );
    }
    assert_eq!(
        classified.len(),
        declared.len(),
        "a name listed twice or not declared"
    );
}

#[test]
fn with_kserves_defaults_the_policy_writes_the_two_metrics_annotations() {
    let share = share(&inputs("false", "false")).unwrap();
    assert!(share.excluded.is_empty(), "{:?}", share.excluded);
    let paths: Vec<(&str, &str)> = (share.with_annotations.iter())
        .map(|op| (op.path.as_str(), op.value.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            (
                "/metadata/annotations/serving.kserve.io~1enable-metric-aggregation",
                "\"false\""
            ),
            (
                "/metadata/annotations/serving.kserve.io~1enable-prometheus-scraping",
                "\"false\""
            ),
        ]
    );
    assert_eq!(share.without_annotations.len(), 1);
    assert_eq!(share.without_annotations[0].path, "/metadata/annotations");
}

#[test]
fn aggregation_on_sends_queue_proxy_pods_to_the_webhook() {
    let share = share(&inputs("true", "true")).unwrap();
    assert_eq!(
        share.excluded,
        [(Containers::Regular, QUEUE_PROXY_CONTAINER)]
    );
    let conditions = share.conditions();
    let last = conditions.last().unwrap();
    assert_eq!(last.0, "no-queue-proxy-container");
    assert_eq!(
        last.1,
        "!has(object.spec.containers) || !object.spec.containers.exists(c, c.name == \"queue-proxy\")"
    );
    // Scraping on: the Prometheus annotations, on the aggregated port.
    let values: Vec<&str> = share
        .with_annotations
        .iter()
        .map(|op| op.value.as_str())
        .collect();
    assert_eq!(values, ["\"true\"", "\"true\"", "\"9088\"", "\"/metrics\""]);
}

#[test]
fn the_policy_is_a_v1_policy_and_its_binding() {
    let rendered = render(&inputs("false", "true")).unwrap();
    let policy = &rendered.policy;
    assert_eq!(policy["kind"], "MutatingAdmissionPolicy");
    assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(
        rendered.binding["spec"]["policyName"],
        policy["metadata"]["name"]
    );
    let expression = policy["spec"]["mutations"][0]["jsonPatch"]["expression"]
        .as_str()
        .unwrap();
    assert!(
        expression.starts_with("has(object.metadata.annotations) ?"),
        "{expression}"
    );
    assert!(
        expression.contains(
            "JSONPatch{op: \"add\", path: \"/metadata/annotations/prometheus.io~1port\", value: \"9091\"}"
        ),
        "{expression}"
    );
    assert!(
        expression.contains("path: \"/metadata/annotations\", value: {"),
        "{expression}"
    );
    let names: Vec<&str> = (policy["spec"]["matchConditions"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["inference-service-pod", "no-annotation-an-injector-reads"]
    );
}

#[test]
fn cel_literals_are_strings_and_maps_of_strings_only() {
    assert_eq!(cel_literal(&json!("a\"b\\c\n")).unwrap(), r#""a\"b\\c\n""#);
    assert_eq!(
        cel_literal(&json!({"k/1": "v"})).unwrap(),
        r#"{"k/1": "v"}"#
    );
    assert!(cel_literal(&json!(1)).is_err());
    assert!(cel_literal(&json!({"k": 1})).is_err());
    assert!(cel_literal(&json!(["a"])).is_err());
    let op = Op {
        kind: crate::pod::OpKind::Add,
        path: "/spec/x".into(),
        value: "[1]".into(),
    };
    let error = cel_patch("probe", &[op]).unwrap_err();
    assert!(
        matches!(error, PolicyError::Untranslatable { .. }),
        "{error}"
    );
}

/// Without `metadata.namespace`, which the API server sets before admission.
fn without_namespace(mut pod: Value) -> Value {
    if let Some(meta) = pod["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    pod
}

fn annotation_key() -> impl Strategy<Value = String> {
    let mut keys: Vec<String> = (TRIGGERS.iter().chain(WRITTEN_ONLY))
        .map(|(_, k)| k.to_string())
        .collect();
    keys.extend(["example.com/other", "autoscaling.knative.dev/class"].map(String::from));
    let rare = proptest::sample::select(keys);
    // Mostly keys no rule reads, so most pods fall in the share.
    prop_oneof![
        3 => proptest::sample::select(vec![
            "example.com/other".to_string(),
            PROMETHEUS_PORT_ANNOTATION.to_string(),
            PROMETHEUS_PATH_ANNOTATION.to_string(),
        ]),
        1 => rare,
    ]
}

fn annotation_value() -> impl Strategy<Value = String> {
    proptest::sample::select(
        [
            "true",
            "false",
            "",
            "oci://r/m:1",
            "s3://b/m",
            "pvc://c/m",
            "REDIRECT",
            "1000",
            "restricted",
            "native-sidecar",
            "9000",
        ]
        .map(String::from)
        .to_vec(),
    )
}

fn container_name() -> impl Strategy<Value = String> {
    let mut names: Vec<String> = PROBES.iter().map(|(_, n)| n.to_string()).collect();
    names.extend(["istio-proxy", "user"].map(String::from));
    proptest::sample::select(names)
}

fn pod() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        proptest::option::of(proptest::collection::btree_map(
            annotation_key(),
            annotation_value(),
            0..4,
        )),
        proptest::collection::btree_set(container_name(), 0..3),
        proptest::collection::btree_set(container_name(), 0..2),
    )
        .prop_map(|(labelled, annotations, containers, inits)| {
            let mut pod = canonical(false);
            if !labelled {
                pod["metadata"]["labels"] = json!({"app": "other"});
            }
            if let Some(annotations) = annotations {
                pod["metadata"]["annotations"] = json!(annotations);
            }
            for name in containers.iter().filter(|n| *n != KSERVE_CONTAINER) {
                pod = with_container(pod, Containers::Regular, name);
            }
            for name in &inits {
                pod = with_container(pod, Containers::Init, name);
            }
            pod
        })
}

proptest! {
    /// Every pod the match conditions take comes out of the policy's patch
    /// as out of the core, and leaves the share once patched (so
    /// reinvocation adds nothing), and the webhook has nothing more to do
    /// on it: under KServe's defaults and with both metrics switches on.
    #[test]
    fn the_policy_patches_its_share_as_the_core_does(
        pod in pod(),
        switches in proptest::sample::select(vec![("false", "false"), ("true", "true"), ("false", "true"), ("true", "false")]),
    ) {
        let inputs = inputs(switches.0, switches.1);
        let share = share(&inputs).unwrap();
        prop_assume!(share.takes(&pod));
        let core = mutate(&pod, CANONICAL_NAMESPACE, &inputs).unwrap();
        let mut patched = pod.clone();
        apply_all(share.ops_for(&pod), &mut patched).unwrap();
        prop_assert_eq!(&without_namespace(core.pod), &patched);
        prop_assert!(!share.takes(&patched), "the patched pod is still in the share");
        let again = patch(&patched, &inputs).unwrap();
        prop_assert!(again.is_empty(), "the webhook would add {:?}", again);
    }
}
