//! AdmissionReview in, AdmissionReview out (admission.k8s.io/v1 and v1beta1).
//! Pure: the HTTP server and the CLI both hand the request body to [`review`].

use crate::injectors::InjectorOutcome;
use crate::mutation::{mutate, Env, MutationError};
use base64::Engine;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::DynamicObject;
use serde::Deserialize;
use serde_json::Value;

const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// Why a body could not be answered with an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ReviewError {
    #[error("request body is not valid JSON: {0}")]
    Json(String),
    #[error("request body is not an AdmissionReview: {0}")]
    NotAReview(String),
}

/// What happened, for logs and metrics; the wire answer is `body`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    /// The AdmissionReview response, serialised.
    pub body: Vec<u8>,
    pub uid: String,
    pub namespace: String,
    /// The object's name, or its generateName when the name is not set yet.
    pub name: String,
    pub operation: String,
    pub kind: String,
    pub dry_run: bool,
    pub allowed: bool,
    pub patch_ops: usize,
    /// Why the request was denied, when it was.
    pub denial: Option<String>,
    pub outcomes: Vec<(&'static str, InjectorOutcome)>,
}

fn object_name(object: &Value) -> String {
    let meta = object.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    field("name")
        .filter(|n| !n.is_empty())
        .or_else(|| field("generateName"))
        .unwrap_or_default()
        .to_string()
}

fn operation_name(op: &Operation) -> String {
    serde_json::to_value(op)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Answers one AdmissionReview request body.
pub fn review(body: &[u8], env: &Env) -> Result<Reviewed, ReviewError> {
    let mut raw: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::Json(e.to_string()))?;
    // The pod stays raw JSON; only the envelope goes through kube's types.
    // `oldObject` is never read, so its shape cannot make a review fail.
    let request_fields = raw.get_mut("request").and_then(Value::as_object_mut);
    let object = request_fields.and_then(|r| {
        r.remove("oldObject");
        r.remove("object")
    });
    let object = object.filter(|o| !o.is_null());
    // Path tracking allocates at every field, so it runs only to explain a failure.
    let review = match AdmissionReview::<DynamicObject>::deserialize(&raw) {
        Ok(review) => review,
        Err(plain) => {
            let e = serde_path_to_error::deserialize::<_, AdmissionReview<DynamicObject>>(&raw)
                .err()
                .map(|e| format!("{}: {}", e.path(), e.inner()))
                .unwrap_or_else(|| plain.to_string());
            return Err(ReviewError::NotAReview(e));
        }
    };
    if !API_VERSIONS.contains(&review.types.api_version.as_str())
        || review.types.kind != "AdmissionReview"
    {
        return Err(ReviewError::NotAReview(format!(
            "expected kind AdmissionReview in {}, found kind {:?} in {:?}",
            API_VERSIONS.join(" or "),
            review.types.kind,
            review.types.api_version
        )));
    }
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| ReviewError::NotAReview("request: missing".into()))?;

    let mut out = Reviewed {
        body: Vec::new(),
        uid: request.uid.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name: object
            .as_ref()
            .map(object_name)
            .unwrap_or_else(|| request.name.clone()),
        operation: operation_name(&request.operation),
        kind: request.kind.kind.clone(),
        dry_run: request.dry_run,
        allowed: true,
        patch_ops: 0,
        denial: None,
        outcomes: Vec::new(),
    };
    let mut response = AdmissionResponse::from(&request);
    let mut patch = None;
    response.result.code = 200;

    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let applies = is_pod && matches!(request.operation, Operation::Create);
    match object {
        Some(pod) if applies => match mutate(&pod, &out.namespace, env) {
            Ok(m) => {
                out.outcomes = m.outcomes;
                out.patch_ops = m.patch.0.len();
                if out.patch_ops > 0 {
                    patch = Some(m.patch);
                }
            }
            Err(e) => {
                let code = match e {
                    MutationError::Decode { .. } => 400,
                    MutationError::Inject(_) => 500,
                };
                response = response.deny(e.to_string());
                response.result.code = code;
                out.denial = Some(e.to_string());
            }
        },
        None if applies => {
            response = response.deny("request.object: a CREATE of a Pod must carry the pod");
            response.result.code = 400;
            out.denial = Some("request.object missing".into());
        }
        _ => {}
    }
    out.allowed = response.allowed;
    out.body = encode(response, patch.as_ref())?;
    Ok(out)
}

/// kube's `with_patch` stores the patch as bytes that serialise as an array
/// of numbers (kube-rs #1781); the API documents a base64 string, so the
/// patch is added to the serialised envelope here instead.
fn encode(
    response: AdmissionResponse,
    patch: Option<&json_patch::Patch>,
) -> Result<Vec<u8>, ReviewError> {
    let fail = |e: serde_json::Error| ReviewError::Json(e.to_string());
    let mut review = serde_json::to_value(response.into_review()).map_err(fail)?;
    if let (Some(patch), Some(resp)) = (
        patch,
        review.get_mut("response").and_then(Value::as_object_mut),
    ) {
        let bytes = serde_json::to_vec(patch).map_err(fail)?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        resp.insert("patch".into(), Value::String(encoded));
        resp.insert("patchType".into(), Value::String("JSONPatch".into()));
    }
    serde_json::to_vec(&review).map_err(fail)
}

#[cfg(test)]
mod tests;
