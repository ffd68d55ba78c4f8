//! GKE accelerator node selector: pods that ask for NVIDIA GPUs land on the
//! accelerator type named by their annotation.

use super::InjectError;
use crate::constants::{
    GKE_ACCELERATOR_ANNOTATION, GKE_ACCELERATOR_NODE_SELECTOR, NVIDIA_GPU_RESOURCE,
};
use crate::inputs::Inputs;
use crate::pod::{List, WorkingSet};

pub(crate) const NAME: &str = "accelerator";

pub(crate) fn inject(pod: &mut WorkingSet<'_>, _env: &Inputs) -> Result<(), InjectError> {
    let Some(accelerator) = pod
        .annotation(GKE_ACCELERATOR_ANNOTATION)
        .map(str::to_string)
    else {
        return Ok(());
    };
    // Only regular containers' limits count, as in KServe.
    let wants_gpu = pod.containers(List::Containers).iter().any(|c| {
        (c.resources.as_ref().and_then(|r| r.limits.as_ref()))
            .is_some_and(|limits| limits.contains_key(NVIDIA_GPU_RESOURCE))
    });
    if wants_gpu {
        pod.set_node_selector(GKE_ACCELERATOR_NODE_SELECTOR, &accelerator);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::injectors::test_support::run;
    use serde_json::json;

    #[test]
    fn ac1_gpu_limit_and_annotation_set_node_selector() {
        let pod = json!({
            "metadata": {"annotations": {GKE_ACCELERATOR_ANNOTATION: "nvidia-tesla-v100"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        });
        let out = run(inject, &pod).unwrap();
        assert_eq!(
            out["spec"]["nodeSelector"],
            json!({"cloud.google.com/gke-accelerator": "nvidia-tesla-v100"})
        );
        assert_eq!(run(inject, &out).unwrap(), out);
    }

    #[test]
    fn ac2_gpu_without_annotation_is_unchanged() {
        let pod = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
        assert_eq!(run(inject, &pod).unwrap(), pod);
    }

    #[test]
    fn gpu_requests_or_init_containers_do_not_count() {
        let pod = json!({
            "metadata": {"annotations": {GKE_ACCELERATOR_ANNOTATION: "a100"}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
            }
        });
        assert_eq!(run(inject, &pod).unwrap(), pod);
    }
}
