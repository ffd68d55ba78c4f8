//! `the_working_set_edits_as_the_oracle_does` (g): the test oracle's tree
//! editor and the product's working set, given the same script of calls
//! (every read and write the injectors can make, on the containers,
//! volumes, variables and annotations they use), answer every read alike,
//! change the pod on the same calls, and end with the same pod and the same
//! operations. Run on each generated pod and on what a pass made of it,
//! where the containers the injectors add are there to be read and edited.
//! The injectors reach the pod only through these calls, so this holds the
//! pipeline's patch to what an editor of the whole pod would have made.

use super::*;
use kserve_injector_oracle::{compare, script, Call};

const EDITOR_CASES: u32 = 3_000;

fn check(case: &Case, calls: &[Call], changed: &AtomicUsize) -> Result<(), String> {
    let pod = case.parts.render();
    let namespace = Some(case.namespace);
    let mut pods = vec![("the generated pod", pod.clone())];
    if let Ok(m) = mutate(&pod, case.namespace, &envs()[case.env]) {
        pods.push(("the pod after a pass", m.pod));
    }
    for (what, pod) in pods {
        match compare(&pod, namespace, calls) {
            Ok(Some(edited)) => {
                if edited != pod {
                    changed.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(None) => {}
            Err(e) => return Err(format!("(g) on {what}: {e}")),
        }
    }
    Ok(())
}

#[test]
fn the_working_set_edits_as_the_oracle_does() {
    let changed = AtomicUsize::new(0);
    let name = "the_working_set_edits_as_the_oracle_does";
    let profile = Profile {
        release: Release::Head,
        mode: ModelcarMode::Classic,
    };
    run_property(
        name,
        10,
        EDITOR_CASES,
        (case(profile), script(24)),
        |(case, calls)| check(&case, &calls, &changed).map_err(fail),
    );
    let changed = changed.load(Ordering::Relaxed);
    println!("proptest {name}: {changed} scripts changed a pod");
    assert!(
        changed > EDITOR_CASES as usize / 2,
        "{name}: too few scripts wrote anything"
    );
}
