//! `model_volume_is_used_and_stable`: with a `modelVolume` source
//! configured, a pass that adds `kserve-provision-location` adds exactly
//! that source; a pod that had a volume of that name keeps it unchanged; a
//! `pvc://` URI mounts its claim, not the configured source (v0.15's copy
//! mode excepted); a second pass,
//! and one after other webhooks, changes nothing.

use super::*;
use k8s_openapi::api::core::v1::Volume;

fn volume_named<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array)?;
    volumes.iter().find(|v| v["name"] == name)
}

fn check(case: &Case, source: &Value, counts: &[AtomicUsize; 3]) -> Result<(), String> {
    let pod = case.parts.render();
    let mut env = envs()[case.env].clone();
    let volume: Volume = serde_json::from_value(source.clone()).map_err(|e| e.to_string())?;
    env.model_volume = Some(volume);
    let Ok(m) = mutate(&pod, case.namespace, &env) else {
        return Ok(());
    };
    let had = volume_named(&pod, PROVISION_LOCATION_VOLUME);
    let has = volume_named(&m.pod, PROVISION_LOCATION_VOLUME);
    let downloads = names_of(&m.pod, "initContainers")
        .contains(&STORAGE_INITIALIZER_CONTAINER.to_string())
        && !names_of(&pod, "initContainers").contains(&STORAGE_INITIALIZER_CONTAINER.to_string());
    let uri = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SOURCE_URI_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match (had, has) {
        (Some(before), Some(after)) => {
            check!(
                before == after,
                "the pod's own {PROVISION_LOCATION_VOLUME} changed: {before} -> {after}"
            );
            Stats::bump(&counts[0]);
        }
        (None, Some(after)) if downloads && !uri.starts_with("oci://") => {
            check!(
                after == source,
                "the added volume {after} is not the configured {source}"
            );
            Stats::bump(&counts[1]);
        }
        _ => {}
    }
    // v0.15's PVC copy downloads into the model volume.
    let mounts_pvc = !env.config.storage_initializer.pvc_copy_mode;
    if uri.starts_with("pvc://") && had.is_none() && mounts_pvc {
        let added = volume_named(&m.pod, PROVISION_LOCATION_VOLUME);
        check!(
            added.is_none(),
            "a pvc:// URI got the model volume {added:?}"
        );
        Stats::bump(&counts[2]);
    }
    let again = must_succeed("second pass", &m.pod, &env, case)?;
    check!(
        again.patch.is_empty(),
        "second pass changed the pod: {}",
        compact(&again.patch)
    );
    let mut touched = m.pod.clone();
    for other in &case.others {
        apply_other(&mut touched, other);
    }
    if let Ok(after) = mutate(&touched, case.namespace, &env) {
        if let (Some(a), Some(b)) = (
            volume_named(&touched, PROVISION_LOCATION_VOLUME),
            volume_named(&after.pod, PROVISION_LOCATION_VOLUME),
        ) {
            check!(
                a == b,
                "a pass after other webhooks changed {PROVISION_LOCATION_VOLUME}"
            );
        }
    }
    Ok(())
}

fn names_of(pod: &Value, list: &str) -> Vec<String> {
    let items = pod
        .pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array);
    items
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

fn must_succeed(what: &str, pod: &Value, inputs: &Inputs, case: &Case) -> Result<Mutation, String> {
    mutate(pod, case.namespace, inputs).map_err(|e| format!("{what} failed: {e:?}"))
}

#[test]
fn model_volume_is_used_and_stable() {
    // No release changes this feature: HEAD alone keeps the case budget.
    for mode in ModelcarMode::ALL {
        let counts: [AtomicUsize; 3] = Default::default();
        let name = format!("model_volume_is_used_and_stable [--modelcar-mode {mode}]");
        let property = 7 + 16 * (mode == ModelcarMode::NativeSidecar) as u16;
        run_property(
            &name,
            property,
            MODEL_VOLUME_CASES,
            (
                case(Profile {
                    release: Release::Head,
                    mode,
                }),
                model_volume_source(),
            ),
            |(c, source)| check(&c, &source, &counts).map_err(fail),
        );
        let [kept, added, pvc] = counts.each_ref().map(Stats::get);
        println!("proptest {name}: {kept} kept the pod's own volume, {added} got the configured one, {pvc} pvc:// without it");
        assert!(
            added > 0 && kept > 0 && pvc > 0,
            "{name}: the generators missed a shape"
        );
    }
}
