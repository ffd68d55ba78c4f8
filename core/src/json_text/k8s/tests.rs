use super::*;
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerResizePolicy, EnvFromSource, EnvVarSource, ExecAction, Lifecycle,
    LifecycleHandler, ObjectFieldSelector, Probe, ResourceClaim, SecretEnvSource, SecurityContext,
    VolumeDevice,
};
use proptest::prelude::*;

/// What the serde path writes for the same value.
fn through_serde<T: Serialize>(value: &T) -> String {
    super::super::to_string(value).expect("writes")
}

fn amounts(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.to_string())),
        ("memory".to_string(), Quantity(memory.to_string())),
    ])
}

/// Every field of a container set, strings with escapes among them.
fn full_container() -> Container {
    let probe = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["test".into(), "-e".into(), "/mnt/models".into()]),
        }),
        period_seconds: Some(1),
        ..Default::default()
    };
    Container {
        args: Some(vec![
            "sh".into(),
            "-c".into(),
            "echo \"$$(ls)\"\n\t\u{1}é".into(),
        ]),
        command: Some(vec![]),
        env: Some(vec![
            EnvVar {
                name: "A".into(),
                value: Some("a \"b\"".into()),
                value_from: None,
            },
            EnvVar {
                name: "POD".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".into(),
                        api_version: None,
                    }),
                    ..Default::default()
                }),
            },
        ]),
        env_from: Some(vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: "s".into(),
                optional: Some(true),
            }),
            ..Default::default()
        }]),
        image: Some("kserve/agent:v0.15 😀".into()),
        image_pull_policy: Some("IfNotPresent".into()),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec!["sleep".into(), "5".into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        liveness_probe: Some(probe.clone()),
        name: "agent".into(),
        ports: Some(vec![
            ContainerPort {
                container_port: 9081,
                host_ip: Some("0.0.0.0".into()),
                host_port: Some(-1),
                name: Some("agent-port".into()),
                protocol: Some("TCP".into()),
            },
            ContainerPort {
                container_port: 0,
                ..Default::default()
            },
        ]),
        readiness_probe: Some(probe.clone()),
        resize_policy: Some(vec![ContainerResizePolicy {
            resource_name: "cpu".into(),
            restart_policy: "NotRequired".into(),
        }]),
        resources: Some(ResourceRequirements {
            claims: Some(vec![ResourceClaim {
                name: "gpu".into(),
                request: None,
            }]),
            limits: Some(amounts("1", "2Gi")),
            requests: Some(BTreeMap::new()),
        }),
        restart_policy: Some("Always".into()),
        security_context: Some(SecurityContext {
            run_as_user: Some(1000),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            ..Default::default()
        }),
        startup_probe: Some(probe),
        stdin: Some(false),
        stdin_once: Some(true),
        termination_message_path: Some("/dev/termination-log".into()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        tty: Some(true),
        volume_devices: Some(vec![VolumeDevice {
            device_path: "/dev/x".into(),
            name: "x".into(),
        }]),
        volume_mounts: Some(vec![VolumeMount {
            mount_path: "/mnt".into(),
            mount_propagation: Some("None".into()),
            name: "kserve-provision-location".into(),
            read_only: Some(true),
            recursive_read_only: Some("Disabled".into()),
            sub_path: Some("models".into()),
            sub_path_expr: Some("$(POD)".into()),
        }]),
        working_dir: Some("/w".into()),
    }
}

#[test]
fn a_container_with_every_field_is_written_as_serde_writes_it() {
    let c = full_container();
    assert_eq!(container(&c).expect("writes"), through_serde(&c));
}

#[test]
fn a_container_with_only_a_name_is_written_as_serde_writes_it() {
    let c = Container {
        name: "n".into(),
        ..Default::default()
    };
    assert_eq!(container(&c).expect("writes"), r#"{"name":"n"}"#);
    assert_eq!(container(&c).expect("writes"), through_serde(&c));
}

#[test]
fn variables_mounts_and_ports_are_written_as_serde_writes_them() {
    let c = full_container();
    for var in c.env.iter().flatten() {
        assert_eq!(env_var(var).expect("writes"), through_serde(var));
    }
    for mount in c.volume_mounts.iter().flatten() {
        assert_eq!(volume_mount(mount), through_serde(mount));
    }
    let bare = VolumeMount::default();
    assert_eq!(volume_mount(&bare), through_serde(&bare));
    for port in c.ports.iter().flatten() {
        assert_eq!(container_port(port), through_serde(port));
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{0,12}",
        any::<String>(),
        Just("\"\\\u{0}\u{1f}\u{7f}".to_string()),
    ]
}

fn opt<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

fn env_vars() -> impl Strategy<Value = EnvVar> {
    (text(), opt(text())).prop_map(|(name, value)| EnvVar {
        name,
        value,
        value_from: None,
    })
}

fn mounts() -> impl Strategy<Value = VolumeMount> {
    (text(), text(), opt(any::<bool>()), opt(text())).prop_map(
        |(name, mount_path, read_only, sub_path)| VolumeMount {
            name,
            mount_path,
            read_only,
            sub_path,
            ..Default::default()
        },
    )
}

fn ports() -> impl Strategy<Value = ContainerPort> {
    (any::<i32>(), opt(any::<i32>()), opt(text()), opt(text())).prop_map(
        |(container_port, host_port, name, protocol)| ContainerPort {
            container_port,
            host_port,
            name,
            protocol,
            ..Default::default()
        },
    )
}

fn quantities() -> impl Strategy<Value = BTreeMap<String, Quantity>> {
    proptest::collection::btree_map(text(), text().prop_map(Quantity), 0..3)
}

proptest! {
    #[test]
    fn any_container_of_these_fields_is_written_as_serde_writes_it(
        name in text(),
        image in opt(text()),
        args in opt(proptest::collection::vec(text(), 0..4)),
        env in opt(proptest::collection::vec(env_vars(), 0..4)),
        mounts in opt(proptest::collection::vec(mounts(), 0..3)),
        ports in opt(proptest::collection::vec(ports(), 0..3)),
        limits in opt(quantities()),
        requests in opt(quantities()),
        with_resources in any::<bool>(),
        tty in opt(any::<bool>()),
        policy in opt(text()),
    ) {
        let c = Container {
            name,
            image,
            args,
            env,
            volume_mounts: mounts,
            ports,
            resources: with_resources.then_some(ResourceRequirements {
                limits,
                requests,
                claims: None,
            }),
            tty,
            termination_message_policy: policy,
            ..Default::default()
        };
        prop_assert_eq!(container(&c).expect("writes"), through_serde(&c));
    }
}

#[test]
fn a_literal_variable_is_written_as_its_env_var_is() {
    for (name, value) in [("A", "b"), ("EMPTY", ""), ("Q", "\"quoted\"\n")] {
        let var = EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        };
        assert_eq!(literal_env_var(name, value), through_serde(&var));
    }
}
