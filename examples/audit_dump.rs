//! Writes a cluster dump for `kserve-injector audit --objects`, as
//! `kubectl get pods,rs,deploy,cm -A -o json` prints it: KServe predictor
//! Deployments, their ReplicaSets and pods, and `inferenceservice-config`.
//! Each pod's spec is what this webhook makes of its template (through
//! the same core), with what the API server and the kubelet add (defaults,
//! the token volume, node, status, managedFields).
//!
//! ```text
//! cargo run --release --example audit_dump -- --pods 10000 > big.json
//! /usr/bin/time -v target/release/kserve-injector audit --objects big.json > /dev/null
//! ```
//!
//! `--differ N` changes one env var in N pods, `--orphans N` adds N pods
//! without an owner, `--pods-per-rs N` sets the replicas, `--yaml` writes
//! one YAML document per object instead of a JSON List.

use kserve_injector_core::constants::{ISVC_LABEL, SOURCE_URI_ANNOTATION};
use kserve_injector_core::mutate_template;
use kserve_injector_core::{config::Config, Inputs};
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::process::ExitCode;

struct Options {
    pods: usize,
    per_rs: usize,
    differ: usize,
    orphans: usize,
    yaml: bool,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        pods: 10_000,
        per_rs: 1,
        differ: 0,
        orphans: 0,
        yaml: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--yaml" {
            o.yaml = true;
            continue;
        }
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
        match flag.as_str() {
            "--pods" => o.pods = value,
            "--pods-per-rs" => o.per_rs = value.max(1),
            "--differ" => o.differ = value,
            "--orphans" => o.orphans = value,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(o)
}

fn template(isvc: &str, hash: &str) -> Value {
    json!({
        "metadata": {
            "labels": {ISVC_LABEL: isvc, "component": "predictor", "app": format!("isvc.{isvc}-predictor"),
                "serving.kserve.io/inferenceservice-type": "predictor", "pod-template-hash": hash},
            "annotations": {SOURCE_URI_ANNOTATION: format!("s3://models/{isvc}/v1"),
                "serving.kserve.io/deploymentMode": "RawDeployment"}
        },
        "spec": {
            "containers": [{
                "name": "kserve-container", "image": "kserve/sklearnserver:v0.15.0",
                "args": ["--model_name", isvc, "--model_dir", "/mnt/models", "--http_port", "8080"],
                "env": [{"name": "PORT", "value": "8080"}, {"name": "K_SERVICE", "value": format!("{isvc}-predictor")},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "ports": [{"name": "http1", "containerPort": 8080, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/v1/models/m", "port": 8080, "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
                "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "securityContext": {}, "schedulerName": "default-scheduler"
        }
    })
}

/// What the API server and the kubelet add to an admitted pod.
fn admitted(mut pod: Value, node: usize) -> Value {
    let token = "kube-api-access-7x2lq";
    let spec = &mut pod["spec"];
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            let o = c.as_object_mut().expect("container");
            o.entry("imagePullPolicy").or_insert(json!("IfNotPresent"));
            o.entry("terminationMessagePath")
                .or_insert(json!("/dev/termination-log"));
            o.entry("terminationMessagePolicy").or_insert(json!("File"));
            o.entry("resources").or_insert(json!({}));
            let mounts = o.entry("volumeMounts").or_insert(json!([]));
            mounts
                .as_array_mut()
                .expect("mounts")
                .push(json!({"name": token, "readOnly": true,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));
        }
    }
    spec["nodeName"] = json!(format!("node-{}", node % 50));
    spec["serviceAccountName"] = json!("default");
    spec["serviceAccount"] = json!("default");
    spec["enableServiceLinks"] = json!(true);
    spec["priority"] = json!(0);
    spec["tolerations"] = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
    let volumes = spec
        .as_object_mut()
        .expect("spec")
        .entry("volumes")
        .or_insert(json!([]));
    volumes
        .as_array_mut()
        .expect("volumes")
        .push(json!({"name": token, "projected": {"defaultMode": 420,
        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}));
    pod["status"] = json!({"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.2.3",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "containerStatuses": [{"name": "kserve-container", "ready": true, "restartCount": 0,
            "image": "kserve/sklearnserver:v0.15.0", "imageID": "docker.io/kserve/sklearnserver@sha256:0123",
            "containerID": "containerd://0123456789abcdef", "started": true,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]});
    pod["metadata"]["managedFields"] = json!([{"manager": "kube-controller-manager", "operation": "Update",
        "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:component": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"kserve-container\"}": {".": {}, "f:image": {}}}}}}]);
    pod
}

fn meta(namespace: &str, name: &str, owner: Option<(&str, &str)>, labels: &Value) -> Value {
    let mut m = json!({"namespace": namespace, "name": name, "uid": format!("uid-{name}"),
        "resourceVersion": "12345", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": labels});
    if let Some((kind, owner)) = owner {
        m["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner,
            "uid": format!("uid-{owner}"), "controller": true, "blockOwnerDeletion": true}]);
    }
    m
}

struct Out<W: Write> {
    w: W,
    yaml: bool,
    first: bool,
}

impl<W: Write> Out<W> {
    fn put(&mut self, v: &Value) -> Result<(), String> {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        if self.yaml {
            self.w.write_all(b"---\n").map_err(|x| e(&x))?;
            kserve_injector_core::reader::write_yaml(&mut self.w, v)
                .map_err(|x| e(&format!("{x:?}")))
        } else {
            if !self.first {
                self.w.write_all(b",\n").map_err(|x| e(&x))?;
            }
            self.first = false;
            serde_json::to_writer(&mut self.w, v).map_err(|x| e(&x))
        }
    }
}

fn run(o: &Options) -> Result<(), String> {
    let stdout = std::io::stdout().lock();
    let mut out = Out {
        w: BufWriter::new(stdout),
        yaml: o.yaml,
        first: true,
    };
    let inputs = Inputs::new(Config::default());
    if !o.yaml {
        out.w
            .write_all(b"{\"apiVersion\":\"v1\",\"items\":[\n")
            .map_err(|e| e.to_string())?;
    }
    let config: Value =
        kserve_injector_core::reader::documents(&mut Config::default_manifest().as_bytes())
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no default config")?
            .map_err(|e| e.to_string())?;
    out.put(&config)?;
    let replica_sets = o.pods.div_ceil(o.per_rs);
    let mut pod_index = 0;
    for r in 0..replica_sets {
        let namespace = format!("models-{}", r % 10);
        let isvc = format!("model-{r}");
        let hash = format!("{:x}", 0x5f00_0000 + r);
        let (deploy, rs) = (
            format!("{isvc}-predictor"),
            format!("{isvc}-predictor-{hash}"),
        );
        let t = template(&isvc, &hash);
        let labels = t["metadata"]["labels"].clone();
        out.put(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(&namespace, &deploy, None, &labels),
            "spec": {"replicas": o.per_rs, "template": t}}))?;
        out.put(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta(&namespace, &rs, Some(("Deployment", &deploy)), &labels),
            "spec": {"replicas": o.per_rs, "template": t}}))?;
        let mutated = mutate_template(&t, &namespace, &inputs)
            .map_err(|e| e.to_string())?
            .pod;
        for p in 0..o.per_rs.min(o.pods - pod_index) {
            let name = format!("{rs}-{p:05}");
            let mut pod = admitted(
                json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": meta(&namespace, &name, Some(("ReplicaSet", &rs)), &labels), "spec": mutated["spec"]}),
                pod_index,
            );
            pod["metadata"]["annotations"] = mutated["metadata"]["annotations"].clone();
            if pod_index < o.differ {
                pod["spec"]["containers"][0]["env"][0]["value"] = json!("9090");
            }
            out.put(&pod)?;
            pod_index += 1;
        }
    }
    for i in 0..o.orphans {
        let t = template("orphan", "0");
        let mutated = mutate_template(&t, "models-0", &inputs)
            .map_err(|e| e.to_string())?
            .pod;
        let name = format!("orphan-{i}");
        out.put(&admitted(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": meta("models-0", &name, None, &t["metadata"]["labels"]), "spec": mutated["spec"]}), i))?;
    }
    if !o.yaml {
        out.w
            .write_all(b"\n],\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"}}\n")
            .map_err(|e| e.to_string())?;
    }
    out.w.flush().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    match parse().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("audit_dump: {e}");
            ExitCode::from(2)
        }
    }
}
