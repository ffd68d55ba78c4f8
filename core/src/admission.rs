//! AdmissionReview in, AdmissionReview out (admission.k8s.io/v1 and v1beta1).
//! Pure: the HTTP server and the CLI both hand the request body to
//! [`prepare`], with the [`Mode`] to answer in, and answer the [`Prepared`]
//! request ([`Prepared::answer`]). Between the two the server looks up the
//! cluster objects the prepared review asks for, and may answer otherwise
//! ([`Prepared::deny`], [`Prepared::refuse`], [`Prepared::untouched`]); the
//! CLI answers at once.
//!
//! One pass over the body: the envelope is decoded into borrowed fields and
//! the pod is kept as raw JSON text (`RawValue`, checked to be valid JSON but
//! not decoded); only a CREATE of a Pod then decodes the pod's view (the
//! fields the injectors read, `crate::view`). The answer is written
//! straight into one buffer, with the patch serialised and base64-encoded in
//! place.

use crate::config::Config;
use crate::constants::ISVC_LABEL;
use crate::injectors::modelcar::ShapeChoice;
use crate::injectors::InjectorOutcome;
use crate::mutation::{edit, Inputs, MutationError};
use crate::pod_facts::PodFacts;
use crate::shared_error::SharedError;
use crate::view::{self, PodView, Str, ViewError};
use encode::encode;
use kube_core::admission::Operation;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// Why a body could not be answered with an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("request body is not valid JSON: {0}")]
    Json(#[source] NotJson),
    #[error("request body is not an AdmissionReview: {0}")]
    NotAReview(#[source] NotAReview),
}

/// Why a body is not JSON.
#[derive(Debug, thiserror::Error)]
pub enum NotJson {
    #[error("invalid UTF-8: {0}")]
    Utf8(#[source] std::str::Utf8Error),
    #[error(transparent)]
    Json(SharedError<serde_json::Error>),
}

/// Why a JSON body is not an AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum NotAReview {
    /// A field of the wrong type, at its path in the body.
    #[error("{path}: {source}")]
    Field {
        path: String,
        source: SharedError<serde_json::Error>,
    },
    #[error(transparent)]
    Json(SharedError<serde_json::Error>),
    #[error("expected kind AdmissionReview in {}, found kind {kind:?} in {api_version:?}", API_VERSIONS.join(" or "))]
    Kind { kind: String, api_version: String },
    #[error("request: missing")]
    NoRequest,
}

/// What happened, for logs and metrics; the wire answer is `body`.
#[derive(Debug)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Reviewed {
    /// The AdmissionReview response, serialised.
    pub body: Vec<u8>,
    pub uid: String,
    pub namespace: String,
    /// The object's name, or its generateName when the name is not set yet.
    pub name: String,
    /// The pod's generateName, when it has one.
    pub generate_name: Option<String>,
    pub operation: String,
    pub kind: String,
    pub dry_run: bool,
    pub allowed: bool,
    pub patch_ops: usize,
    /// Why the request was denied, when it was.
    pub denial: Option<String>,
    pub outcomes: Vec<(&'static str, InjectorOutcome)>,
    /// The modelcar's shape and why, when the pod gets a modelcar.
    pub modelcar_shape: Option<ShapeChoice>,
    /// What the pod asks for that the selected KServe release lacks.
    pub unsupported: Vec<crate::mutation::Unsupported>,
    /// In shadow mode, the operations the answer left out: what this
    /// webhook would have changed.
    pub withheld: Vec<Withheld>,
    /// In shadow mode, the denial the answer left out: why this webhook
    /// would have refused the pod (then `allowed` is true, `denial` empty).
    pub withheld_denial: Option<String>,
}

/// One operation shadow mode computed and did not send.
#[derive(Debug)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Withheld {
    pub op: &'static str,
    pub path: String,
    /// The injector the operation comes from.
    pub injector: &'static str,
}

/// How a [`Prepared`] request is answered.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub enum Mode {
    /// Allowed with the patch, or denied: the webhook's job.
    #[default]
    Mutate,
    /// Always allowed, never with a patch: what the patch would hold is
    /// reported in [`Reviewed::withheld`], a denial in
    /// [`Reviewed::withheld_denial`], and with `warnings` either one in the
    /// response's `warnings`, which kubectl prints.
    Shadow { warnings: bool },
}

/// The longest warning written; the API server drops warnings past 4 KiB
/// in all and kubectl shows each on one line.
const MAX_WARNING_CHARS: usize = 240;

/// The shadow warning: how many operations, then as many of their paths
/// and injectors as fit.
fn shadow_warning(withheld: &[Withheld]) -> String {
    let mut injectors: Vec<&str> = Vec::new();
    for w in withheld {
        if !injectors.contains(&w.injector) {
            injectors.push(w.injector);
        }
    }
    let mut text = format!(
        "kserve-injector (shadow mode) would make {} change(s) by {}:",
        withheld.len(),
        injectors.join(", ")
    );
    for (i, w) in withheld.iter().enumerate() {
        let item = format!(" {} {} ({})", w.op, w.path, w.injector);
        if text.len() + item.len() + 6 > MAX_WARNING_CHARS {
            text.push_str(&format!(" +{} more", withheld.len() - i));
            break;
        }
        text.push_str(&item);
        if i + 1 < withheld.len() {
            text.push(';');
        }
    }
    text
}

/// The shadow warning for a denial left out: its code and as much of its
/// message as fits.
fn shadow_denial_warning(code: u16, message: &str) -> String {
    let mut text = format!("kserve-injector (shadow mode) would deny the pod (code {code}): ");
    let room = MAX_WARNING_CHARS.saturating_sub(text.len());
    if message.len() <= room {
        text.push_str(message);
    } else {
        let mut end = room.saturating_sub(3);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        text.push_str(&message[..end]);
        text.push_str("...");
    }
    text
}

/// The envelope, as kube's `AdmissionReview` requires it, borrowed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewView<'a> {
    #[serde(borrow)]
    api_version: Str<'a>,
    #[serde(borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    request: Option<RequestView<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestView<'a> {
    #[serde(borrow)]
    uid: Str<'a>,
    #[serde(borrow)]
    kind: GroupVersionKind<'a>,
    #[allow(dead_code)] // Required by the schema, never read.
    resource: GroupVersionResource<'a>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    operation: Operation,
    #[allow(dead_code)] // Required by the schema, never read.
    user_info: IgnoredAny,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    /// The pod's view, when the fast path decoded it in place of `object`.
    #[serde(skip)]
    pod: Option<PodView<'a>>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
struct GroupVersionKind<'a> {
    #[serde(borrow)]
    group: Str<'a>,
    #[allow(dead_code)] // Required by the schema, never read.
    #[serde(borrow)]
    version: Str<'a>,
    #[serde(borrow)]
    kind: Str<'a>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Required by the schema, never read.
struct GroupVersionResource<'a> {
    #[serde(borrow)]
    group: Str<'a>,
    #[serde(borrow)]
    version: Str<'a>,
    #[serde(borrow)]
    resource: Str<'a>,
}

/// Name and generateName of any object, read leniently: they only label logs.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NameView<'a> {
    #[serde(borrow, default)]
    metadata: Option<NameMeta<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NameMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    generate_name: Option<Str<'a>>,
}

fn object_name(object: &RawValue) -> Option<String> {
    let view: NameView = serde_json::from_str(object.get()).ok()?;
    let meta = view.metadata?;
    meta.name
        .filter(|n| !n.as_str().is_empty())
        .or(meta.generate_name)
        .map(|n| n.as_str().to_string())
}

fn operation_name(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// The body as text. serde_json skips the strings nobody reads without
/// checking their UTF-8, so the whole body is checked once here: invalid
/// UTF-8 is not JSON. simdutf8 checks 32 bytes an instruction where the CPU
/// allows; std explains a failure, so the message stays std's.
fn utf8(body: &[u8]) -> Result<&str, ReviewError> {
    match simdutf8::basic::from_utf8(body) {
        Ok(text) => Ok(text),
        Err(_) => std::str::from_utf8(body).map_err(|e| ReviewError::Json(NotJson::Utf8(e))),
    }
}

/// Decodes the envelope; path tracking runs only to explain a failure.
fn parse(body: &str) -> Result<ReviewView<'_>, ReviewError> {
    match serde_json::from_str::<ReviewView>(body) {
        Ok(review) => Ok(review),
        Err(e) if e.is_syntax() || e.is_eof() || e.is_io() => Err(not_json(e)),
        Err(plain) => {
            // A type error may come before a syntax error further on: the
            // body must be JSON before it can be a wrong AdmissionReview.
            if let Err(e) = serde_json::from_str::<IgnoredAny>(body) {
                return Err(not_json(e));
            }
            let mut de = serde_json::Deserializer::from_str(body);
            let why = match serde_path_to_error::deserialize::<_, ReviewView>(&mut de) {
                Err(e) => NotAReview::Field {
                    path: e.path().to_string(),
                    source: e.into_inner().into(),
                },
                Ok(_) => NotAReview::Json(plain.into()),
            };
            Err(ReviewError::NotAReview(why))
        }
    }
}

fn not_json(e: serde_json::Error) -> ReviewError {
    ReviewError::Json(NotJson::Json(e.into()))
}

/// The `response` of an AdmissionReview, as kube's `AdmissionResponse`
/// serialises it.
pub(crate) struct Answer<'a> {
    pub(super) uid: &'a str,
    pub(super) allowed: bool,
    pub(super) code: u16,
    pub(super) message: Option<String>,
    pub(super) patch: Option<Vec<crate::pod::Op>>,
    pub(super) warnings: Vec<String>,
}

impl<'a> Answer<'a> {
    /// Allowed, with no patch yet.
    fn allow(uid: &'a str) -> Self {
        Self {
            uid,
            allowed: true,
            code: 200,
            message: None,
            patch: None,
            warnings: Vec::new(),
        }
    }

    /// Denied with `code` and `message`.
    fn refuse(uid: &'a str, code: u16, message: &str) -> Self {
        Self {
            allowed: false,
            code,
            message: Some(message.to_string()),
            ..Self::allow(uid)
        }
    }
}

/// A request decoded in one pass and not yet answered. Between
/// [`prepare`] and [`Prepared::answer`] an adapter may fetch the cluster
/// objects the pod needs ([`Prepared::lookup_facts`]); the core stays pure.
pub struct Prepared<'a> {
    api_version: Str<'a>,
    uid: Str<'a>,
    namespace: Str<'a>,
    /// A CREATE of a Pod: the only request that is mutated.
    applies: bool,
    pod: Option<Result<PodView<'a>, ViewError>>,
    out: Reviewed,
    mode: Mode,
    /// The most patch bytes, base64-encoded, an answer may carry.
    max_patch: usize,
}

/// Decodes a request body, to be answered in `mode`: the envelope, and for
/// a CREATE of a Pod the view of the pod. A body that is not an
/// AdmissionReview (not JSON, another kind, no request) is an error (HTTP
/// 400) in both modes: it cannot be answered, having no uid to answer.
/// Everything else gets an answer; in shadow mode every answer, a denial
/// included, is `allowed` without a patch.
pub fn prepare(body: &[u8], mode: Mode) -> Result<Prepared<'_>, ReviewError> {
    let body = utf8(body)?;
    let review = match inline::parse(body) {
        Some(review) => review,
        None => parse(body)?,
    };
    if !API_VERSIONS.contains(&review.api_version.as_str())
        || review.kind.as_str() != "AdmissionReview"
    {
        return Err(ReviewError::NotAReview(NotAReview::Kind {
            kind: review.kind.as_str().to_string(),
            api_version: review.api_version.as_str().to_string(),
        }));
    }
    let mut request = review
        .request
        .ok_or(ReviewError::NotAReview(NotAReview::NoRequest))?;
    let object = request.object.filter(|o| o.get() != "null");
    let inline_pod = request.pod.take();
    let is_pod = request.kind.group.as_str().is_empty() && request.kind.kind.as_str() == "Pod";
    let applies = is_pod && matches!(request.operation, Operation::Create);
    let pod = match (inline_pod, object) {
        (Some(pod), _) => Some(view::within_budget(pod)),
        (None, Some(raw)) if applies => Some(view::pod_from_str(raw.get())),
        _ => None,
    };
    let name = match &pod {
        // An object that is present names the review, even when it is refused.
        Some(Ok(pod)) => pod.display_name().unwrap_or_default().to_string(),
        _ => match object {
            Some(raw) => object_name(raw).unwrap_or_default(),
            None => (request.name.as_ref().map(Str::as_str))
                .unwrap_or_default()
                .to_string(),
        },
    };
    let generate_name = match &pod {
        Some(Ok(pod)) => (pod.metadata.as_ref())
            .and_then(|m| m.generate_name.as_ref())
            .map(|g| g.as_str().to_string()),
        _ => None,
    };
    let namespace = request.namespace.take().unwrap_or_default();
    let out = Reviewed {
        body: Vec::new(),
        uid: request.uid.as_str().to_string(),
        namespace: namespace.as_str().to_string(),
        name,
        generate_name,
        operation: operation_name(&request.operation).to_string(),
        kind: request.kind.kind.as_str().to_string(),
        dry_run: request.dry_run.unwrap_or(false),
        allowed: true,
        patch_ops: 0,
        denial: None,
        outcomes: Vec::new(),
        withheld: Vec::new(),
        withheld_denial: None,
        modelcar_shape: None,
        unsupported: Vec::new(),
    };
    Ok(Prepared {
        api_version: review.api_version,
        uid: request.uid,
        namespace,
        applies,
        pod,
        out,
        mode,
        max_patch: usize::MAX,
    })
}

impl Prepared<'_> {
    /// Answers with a patch of at most `bytes` once base64-encoded: a pod
    /// whose patch is larger is denied (code 413) before the patch is
    /// written, so a server's memory bound holds however large the pod. No
    /// pod that needs a patch of megabytes can be stored: the API server
    /// and etcd refuse objects of that size.
    pub fn answer_at_most(mut self, bytes: usize) -> Self {
        self.max_patch = bytes;
        self
    }

    /// What the cluster lookups need to know of the pod; `None` when the
    /// request reads no cluster object (not a CREATE of a Pod, a pod that
    /// cannot be read, or one without the InferenceService label).
    pub fn lookup_facts(&self, config: &Config) -> Option<PodFacts> {
        match &self.pod {
            Some(Ok(pod)) if self.applies && pod.label(ISVC_LABEL).is_some() => {
                Some(pod.facts(self.namespace.as_str(), config))
            }
            _ => None,
        }
    }

    /// Answers with the injectors' edits, or a denial; in shadow mode
    /// allowed, without either.
    pub fn answer(self, inputs: &Inputs) -> Result<Reviewed, ReviewError> {
        let result = match self.pod {
            Some(pod) if self.applies => Some(
                pod.map_err(MutationError::from)
                    .and_then(|pod| Ok(edit(pod, self.namespace.as_str(), true, inputs)?)),
            ),
            _ => None,
        };
        let uid = self.uid.as_str();
        let mut out = self.out;
        let answer = match result {
            Some(Ok(edits)) => {
                let mut answer = Answer::allow(uid);
                out.outcomes = edits.outcomes;
                out.modelcar_shape = edits.modelcar_shape;
                out.unsupported = edits.unsupported;
                match self.mode {
                    Mode::Shadow { warnings } => {
                        out.withheld = (edits.ops.iter().zip(&edits.sources))
                            .map(|(op, injector)| Withheld {
                                op: op.name(),
                                path: op.path.clone(),
                                injector,
                            })
                            .collect();
                        if warnings && !out.withheld.is_empty() {
                            answer.warnings.push(shadow_warning(&out.withheld));
                        }
                    }
                    Mode::Mutate => match encode::oversized(&edits.ops, self.max_patch) {
                        Some(len) => {
                            let message = format!(
                                "the JSON Patch for this pod would be {len} bytes base64-encoded, more than the {} this webhook may hold for one answer (serve --max-buffered-bytes); a pod that needs a patch this large cannot be stored (the API server and etcd refuse objects of a few MiB)",
                                self.max_patch
                            );
                            answer = Answer::refuse(uid, 413, &message);
                        }
                        None => {
                            out.patch_ops = edits.ops.len();
                            if !edits.ops.is_empty() {
                                answer.patch = Some(edits.ops);
                            }
                        }
                    },
                }
                answer
            }
            Some(Err(e)) => {
                let code = match e {
                    MutationError::Decode { .. } => 400,
                    MutationError::Inject(_) => 500,
                };
                Answer::refuse(uid, code, &e.to_string())
            }
            None if self.applies => Answer::refuse(
                uid,
                400,
                "request.object: a CREATE of a Pod must carry the pod",
            ),
            None => Answer::allow(uid),
        };
        finish(self.api_version.as_str(), out, answer, self.mode)
    }

    /// Denies the request (HTTP 200, `allowed: false`, code 500): a cluster
    /// lookup it needed could not be answered, which KServe fails too.
    pub fn deny(self, message: &str) -> Result<Reviewed, ReviewError> {
        self.refuse(500, message)
    }

    /// Denies the request with `code` in its status (HTTP 200 all the same).
    pub fn refuse(self, code: u16, message: &str) -> Result<Reviewed, ReviewError> {
        let answer = Answer::refuse(self.uid.as_str(), code, message);
        finish(self.api_version.as_str(), self.out, answer, self.mode)
    }

    /// Admits the request with no change, whatever the injectors would do.
    pub fn untouched(self) -> Result<Reviewed, ReviewError> {
        let answer = Answer::allow(self.uid.as_str());
        finish(self.api_version.as_str(), self.out, answer, self.mode)
    }
}

/// Records `answer` in `out` and writes it. In shadow mode a denial becomes
/// an allowance: the reason goes to [`Reviewed::withheld_denial`] and, with
/// warnings, into the response's `warnings`.
fn finish(
    api_version: &str,
    mut out: Reviewed,
    mut answer: Answer<'_>,
    mode: Mode,
) -> Result<Reviewed, ReviewError> {
    if !answer.allowed {
        let message = answer.message.take().unwrap_or_default();
        match mode {
            Mode::Mutate => {
                answer.message = Some(message.clone());
                out.denial = Some(message);
            }
            Mode::Shadow { warnings } => {
                if warnings {
                    let warning = shadow_denial_warning(answer.code, &message);
                    answer.warnings.push(warning);
                }
                out.withheld_denial = Some(message);
                answer.allowed = true;
                answer.code = 200;
            }
        }
    }
    out.allowed = answer.allowed;
    out.body = encode(api_version, &answer)?;
    Ok(out)
}

mod encode;
mod inline;
mod skim;

#[cfg(test)]
mod tests;
