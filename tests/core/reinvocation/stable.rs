//! `reinvocation_is_stable`: properties (a) to (e) over a pass, a
//! pass on our own output, and passes after other webhooks.

use super::*;

pub(super) fn stable(case: &Case, stats: &Stats) -> Result<(), String> {
    Stats::bump(&stats.cases);
    let pod = case.parts.render();
    check_unique("generated input", &pod)?;
    let first = match run_pass("pass 1", &pod, case)? {
        Ok(m) => m,
        Err(_) => {
            Stats::bump(&stats.refused);
            return Ok(());
        }
    };
    let native = |pod: &Value| {
        (pod["spec"]["initContainers"].as_array())
            .is_some_and(|items| has_named(items, MODELCAR_CONTAINER))
    };
    if native(&first.pod) && !native(&pod) {
        Stats::bump(&stats.native_sidecars);
    }
    if first.outcomes.is_empty() {
        Stats::bump(&stats.unlabelled);
    } else if !first.patch.is_empty() {
        Stats::bump(&stats.injected);
    }
    if let Ok(mut by) = stats.injected_by.lock() {
        for (injector, outcome) in &first.outcomes {
            if *outcome == InjectorOutcome::Injected {
                *by.entry(injector).or_default() += 1;
            }
        }
    }
    let own = must_succeed("pass 2 (own output)", &first.pod, case)?;
    check_empty("pass 2 (own output)", &own)?;

    let mut reinvoked = first.pod.clone();
    for other in &case.others {
        apply_other(&mut reinvoked, other);
    }
    check_unique("after the other webhooks", &reinvoked)?;
    let again = must_succeed("pass after other webhooks", &reinvoked, case)?;
    if case.others.iter().any(Other::triggers) {
        Stats::bump(&stats.triggered);
        // Only what the re-triggered injectors own may change.
        let mut allowed = vec!["/spec/nodeSelector".to_string()];
        if let Some(i) = reinvoked["spec"]["initContainers"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .position(|c| c["name"] == STORAGE_INITIALIZER_CONTAINER)
            })
        {
            allowed.push(format!("/spec/initContainers/{i}/securityContext"));
        }
        for op in &again.patch {
            let path = op.path.as_str();
            check!(
                allowed.iter().any(|a| within(path, a)),
                "pass after other webhooks: (c) operation {} is outside what the triggered injectors own ({allowed:?})",
                compact(op)
            );
        }
        let settled = must_succeed("pass after the triggered pass", &again.pod, case)?;
        check_empty("pass after the triggered pass", &settled)?;
    } else {
        check_empty("pass after other webhooks", &again)?;
    }
    Ok(())
}

#[test]
pub(super) fn reinvocation_is_stable() {
    // The coverage checks below hold per mode, over every release's share.
    for mode in ModelcarMode::ALL {
        let stats = Stats::default();
        let name = format!("reinvocation_is_stable [--modelcar-mode {mode}]");
        for profile in Profile::all().into_iter().filter(|p| p.mode == mode) {
            let name = format!("reinvocation_is_stable [{profile}]");
            let property = 1 + profile.seed_offset();
            let cases = Profile::share(STABLE_CASES);
            run_property(&name, property, cases, case(profile), |c| {
                stable(&c, &stats).map_err(fail)
            });
        }
        report(
            &name,
            &stats,
            &[
                ("without the InferenceService label", &stats.unlabelled),
                ("with a non-empty pass-1 patch", &stats.injected),
                ("with a triggering webhook", &stats.triggered),
                ("given a native-sidecar modelcar", &stats.native_sidecars),
            ],
        );
        // The generators must reach the interesting paths, not just refusals.
        assert!(
            Stats::get(&stats.injected) * 2 > Stats::get(&stats.cases),
            "{name}: fewer than half of the cases were injected; the generators drifted"
        );
        // Native sidecars come from the annotation in classic mode too.
        assert!(
            Stats::get(&stats.native_sidecars) * 200 > Stats::get(&stats.cases),
            "{name}: fewer than 0.5% of the cases got a native-sidecar modelcar"
        );
    }
}
