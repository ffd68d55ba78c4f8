//! `restricted_profile_passes_the_checker`: generated pods go through the
//! pipeline under `--security-profile restricted`, and every container the
//! pass adds must pass the restricted Pod Security Standard checker
//! ([`crate::pod_security`]); a second pass on that output adds nothing and
//! changes nothing. The same pod under `baseline` is run too: every pass
//! that adds a container must then fail the checker, so a run that finds
//! no violation in restricted mode shows the checker could have.

use super::*;
use kserve_injector_core::SecurityProfile;

fn restricted_env(index: usize, profile: SecurityProfile) -> Inputs {
    let mut env = envs()[index].clone();
    env.security_profile = profile;
    env
}

fn added(input: &Value, output: &Value) -> bool {
    let count = |pod: &Value| {
        ["containers", "initContainers"]
            .iter()
            .map(|l| {
                (pod.pointer(&format!("/spec/{l}")).and_then(Value::as_array)).map_or(0, Vec::len)
            })
            .sum::<usize>()
    };
    count(output) > count(input)
}

struct Counts {
    cases: AtomicUsize,
    hardened: AtomicUsize,
    denied: AtomicUsize,
    baseline_failing: AtomicUsize,
}

fn check(case: &Case, counts: &Counts) -> Result<(), String> {
    Stats::bump(&counts.cases);
    let pod = case.parts.render();
    let restricted = restricted_env(case.env, SecurityProfile::Restricted);
    let baseline = restricted_env(case.env, SecurityProfile::Baseline);
    if let Ok(m) = mutate(&pod, case.namespace, &baseline) {
        if added(&pod, &m.pod) {
            let v = crate::pod_security::added_violations(&pod, &m.pod);
            check!(
                !v.is_empty(),
                "baseline: KServe's containers passed the checker"
            );
            Stats::bump(&counts.baseline_failing);
        }
    }
    let m = match mutate(&pod, case.namespace, &restricted) {
        Ok(m) => m,
        Err(_) => {
            Stats::bump(&counts.denied);
            return Ok(());
        }
    };
    if added(&pod, &m.pod) {
        Stats::bump(&counts.hardened);
    }
    let v = crate::pod_security::added_violations(&pod, &m.pod);
    check!(
        v.is_empty(),
        "restricted: containers we added violate the standard: {v:?}"
    );
    let again = mutate(&m.pod, case.namespace, &restricted)
        .map_err(|e| format!("restricted: the second pass failed: {e:?}"))?;
    check!(
        again.patch.is_empty(),
        "restricted: the second pass changed the pod: {}",
        compact(&again.patch)
    );
    Ok(())
}

#[test]
fn restricted_profile_passes_the_checker() {
    // No release changes this feature: HEAD alone keeps the case budget.
    for mode in ModelcarMode::ALL {
        let counts = Counts {
            cases: AtomicUsize::new(0),
            hardened: AtomicUsize::new(0),
            denied: AtomicUsize::new(0),
            baseline_failing: AtomicUsize::new(0),
        };
        let name = format!("restricted_profile_passes_the_checker [--modelcar-mode {mode}]");
        let property = 6 + 16 * (mode == ModelcarMode::NativeSidecar) as u16;
        run_property(
            &name,
            property,
            RESTRICTED_CASES,
            case(Profile {
                release: Release::Head,
                mode,
            }),
            |c| check(&c, &counts).map_err(fail),
        );
        let (cases, hardened) = (Stats::get(&counts.cases), Stats::get(&counts.hardened));
        println!(
            "proptest {name}: {cases} cases, {hardened} with added containers passing the checker, {} denied, {} failing it under baseline",
            Stats::get(&counts.denied),
            Stats::get(&counts.baseline_failing),
        );
        assert!(
            hardened * 4 > cases,
            "{name}: fewer than a quarter of the cases added a container"
        );
        assert!(
            Stats::get(&counts.baseline_failing) >= hardened,
            "{name}: the checker found fewer baseline failures than restricted passes"
        );
    }
}
