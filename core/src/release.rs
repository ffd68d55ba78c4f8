//! KServe release profiles: which release's pod mutator to reproduce
//! (`--kserve-version`). HEAD is the default; an older release is HEAD
//! with the differences listed here switched off or changed, each read in
//! the injector it belongs to. Every release tag from v0.15.0 on is
//! modelled, patch releases included ([`Release::SUPPORTED`]); any other
//! spelling is refused. Patch releases that changed the pod mutator, or the
//! ConfigMap KServe ships, have switches or shipped defaults of their own:
//! v0.15.1 added the logger's `--metadata-annotations`, v0.15.2 shipped the
//! modelcar on; v0.17.1 and v0.18.1 changed neither (`git diff v0.17.0
//! v0.17.1 -- pkg cmd config/configmap` is empty), so each behaves as its
//! `.0`.
//!
//! Where an older release has a bug HEAD fixed, which gives an invalid pod
//! or drops what the user wrote, every profile keeps HEAD's fix (our patch
//! never removes what we did not add, and never makes a pod the API server
//! rejects); docs/compatibility.md lists them per release:
//! - the agent's readiness path is the user's HTTP probe path (kserve#5341,
//!   fixed in v0.18; `AgentInjector.InjectAgent` @v0.17.0 always probes `/`);
//! - `uidModelcar` sets `runAsUser` and keeps the rest of the model
//!   server's securityContext (`ConfigureModelcarToContainer` @v0.17.0
//!   replaces it whole);
//! - a ClusterStorageContainer is merged into a fresh container and a
//!   variable left with both `value` and `valueFrom` is reconciled
//!   (kserve#5516, fixed in v0.20; `mergeContainerSpecs` @v0.19.0 decodes
//!   the merge into the built container, whose env items keep stale fields;
//!   `mergeContainerSpecs` @v0.15.0 decodes into a fresh container but does
//!   not reconcile either);
//! - the Hugging Face token is a `secretKeyRef` (kserve#4674, fixed in
//!   v0.16; `hf.BuildSecretEnvs` @v0.15.0 copies the token into the pod
//!   spec as a literal value, which `audit --credentials` reports, and our
//!   Secret reduction never holds a credential's value);
//! - a bad `cpuModelcar`/`memoryModelcar` is a config error at load
//!   (`getStorageInitializerConfigs` @v0.15.0 does not check them and
//!   `resource.MustParse` panics in the handler of every modelcar pod);
//! - the model volume is added beside a storage-initializer even where every
//!   model container already mounts it (`CommonStorageInitialization`
//!   @v0.16.0 builds the init container with its mount in place, so
//!   `utils.AddModelMount`, which adds the volume only beside a mount it
//!   adds, adds none);
//! - under v0.15.x, a pod that already has the model volume keeps one, and a
//!   direct PVC mount that stops early still gets the claim's volume where
//!   the pod lacks it (`Release::model_mounts_by_name`).
//!
//! Each switch names the Go function it follows and the release that
//! changed it (`git diff vX.Y.0 <HEAD>` of `pkg/webhook/admission/pod`,
//! `pkg/credentials`, `pkg/utils`, `pkg/types` and
//! `pkg/apis/serving/v1beta1/configmap.go` of kserve/kserve).

use std::fmt;

// `Switch` is public to the tests (`internals`, feature `oracle`).
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))]
pub(crate) mod behaviour;
pub(crate) use behaviour::{Behaviour, Switch};

/// A KServe release tag whose pod mutator we reproduce. Ordered by age, so
/// a switch reads as "since" (`release >= Release::V0_18_0`). Two tags
/// whose pod mutator sources are the same (v0.17.0 and v0.17.1) have the
/// same switch values; only their shipped ConfigMaps may tell them apart
/// (v0.15.1 and v0.15.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(any(test, feature = "oracle"), derive(Hash))]
pub enum Release {
    V0_15_0,
    V0_15_1,
    V0_15_2,
    V0_16_0,
    V0_17_0,
    V0_17_1,
    V0_18_0,
    V0_18_1,
    V0_19_0,
    V0_20_0,
    /// kserve/kserve at aaac4e2 (after v0.20.0).
    #[default]
    Head,
}

/// The releases `--kserve-version` knows, newest last.
pub const ALL: [Release; 11] = [
    Release::V0_15_0,
    Release::V0_15_1,
    Release::V0_15_2,
    Release::V0_16_0,
    Release::V0_17_0,
    Release::V0_17_1,
    Release::V0_18_0,
    Release::V0_18_1,
    Release::V0_19_0,
    Release::V0_20_0,
    Release::Head,
];

/// A spelling that names no release.
#[derive(Debug, thiserror::Error)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub enum ReleaseError {
    #[error("{0:?} is not a KServe version: expected one of {list} (also spelled without the v; a minor alone, such as v0.15, names the last patch release of that line, v0.15.2, and v0.15.0 the first)", list = supported_list())]
    Unknown(String),
}

fn supported_list() -> String {
    let names: Vec<&str> = Release::SUPPORTED.iter().map(|r| r.as_str()).collect();
    names.join(", ")
}

impl Release {
    /// The releases whose differences are all modelled, newest last: all.
    pub const SUPPORTED: &'static [Release] = &ALL;

    pub fn as_str(self) -> &'static str {
        match self {
            Release::V0_15_0 => "v0.15.0",
            Release::V0_15_1 => "v0.15.1",
            Release::V0_15_2 => "v0.15.2",
            Release::V0_16_0 => "v0.16.0",
            Release::V0_17_0 => "v0.17.0",
            Release::V0_17_1 => "v0.17.1",
            Release::V0_18_0 => "v0.18.0",
            Release::V0_18_1 => "v0.18.1",
            Release::V0_19_0 => "v0.19.0",
            Release::V0_20_0 => "v0.20.0",
            Release::Head => "head",
        }
    }

    /// The tag's numbers; `None` for HEAD.
    fn tag(self) -> Option<ImageRelease> {
        let numbers = self.as_str().strip_prefix("v0.")?;
        let (minor, patch) = numbers.split_once('.')?;
        Some(ImageRelease {
            major: 0,
            minor: minor.parse().ok()?,
            patch: patch.parse().ok()?,
        })
    }

    /// Reads exactly the spellings `--kserve-version` documents: a tag
    /// (`v0.15.2`, `0.15.2`), a minor alone (`v0.15`, `0.15`), which names
    /// the last patch release of that line this build knows, `head` or
    /// `HEAD`. Nothing else names a release, not even a near miss
    /// (` v0.17`, `V0.17`, `v0.17.3`, `0.17.00`): a value that reads as a
    /// release it does not name would reproduce the wrong mutator without a
    /// word.
    pub(crate) fn parse_any(text: &str) -> Result<Release, ReleaseError> {
        if text == "head" || text == "HEAD" {
            return Ok(Release::Head);
        }
        let numbers = text.strip_prefix('v').unwrap_or(text);
        let numbered = ALL.into_iter().filter(|r| r.tag().is_some());
        let by_tag = |r: &Release| r.as_str().strip_prefix('v') == Some(numbers);
        let by_line = |r: &Release| {
            r.tag()
                .is_some_and(|t| format!("{}.{}", t.major, t.minor) == numbers)
        };
        (numbered.clone().find(by_tag))
            .or_else(|| numbered.rev().find(by_line))
            .ok_or_else(|| ReleaseError::Unknown(text.to_string()))
    }

    /// The numbers of an image tag (`kserve/agent:v0.17.1` → v0.17.1; a
    /// pre-release such as `v0.16.0-rc1` reads as its release): KServe's
    /// release manifests and Helm chart pin the agent and
    /// storage-initializer images to the release. `None` for `latest`, a
    /// digest, or a tag that is not `v<major>.<minor>.<patch>`.
    pub(crate) fn of_image(image: &str) -> Option<ImageRelease> {
        let without_digest = image.split('@').next().unwrap_or(image);
        let name_start = without_digest.rfind('/').map_or(0, |i| i + 1);
        let (_, tag) = without_digest[name_start..].split_once(':')?;
        let numbers = tag.strip_prefix('v')?;
        let mut parts = numbers.split(['.', '-', '+']);
        let mut number = || parts.next()?.parse::<u32>().ok();
        let (major, minor, patch) = (number()?, number()?, number()?);
        Some(ImageRelease {
            major,
            minor,
            patch,
        })
    }

    /// The release whose images carry `tag`: the release of that tag; HEAD
    /// for a line newer than every release known (KServe's main branch
    /// becomes the next minor); `Err` for a tag of a known line that is
    /// not known (`v0.15.3`, `v0.20.1`) or of an older line: which mutator
    /// it runs is not known, and guessing would compare the wrong pods.
    pub(crate) fn of_tag(tag: ImageRelease) -> Result<Release, ImageRelease> {
        let newest = ALL.iter().filter_map(|r| r.tag()).max();
        if let Some(known) = ALL.into_iter().find(|r| r.tag() == Some(tag)) {
            return Ok(known);
        }
        match newest {
            Some(n) if (tag.major, tag.minor) > (n.major, n.minor) => Ok(Release::Head),
            _ => Err(tag),
        }
    }

    /// The releases of `tag`'s line (`v0.15.3` → v0.15.0, v0.15.1, v0.15.2).
    pub(crate) fn of_line(tag: ImageRelease) -> Vec<Release> {
        (ALL.into_iter())
            .filter(|r| {
                r.tag()
                    .is_some_and(|t| (t.major, t.minor) == (tag.major, tag.minor))
            })
            .collect()
    }

    /// Whether images of `tag` belong to this release. KServe's chart at
    /// HEAD still renders `v0.20.0`, so HEAD accepts that tag and any of a
    /// newer line.
    pub(crate) fn matches_image(self, tag: ImageRelease) -> bool {
        match self.tag() {
            Some(own) => own == tag,
            None => {
                Release::of_tag(tag) == Ok(Release::Head) || Some(tag) == Release::V0_20_0.tag()
            }
        }
    }

    // --- storage initializer -------------------------------------------------

    /// LocalModel sub-path `models/<sha256(sourceUri)[:16]>` since v0.18;
    /// before, `models/<LocalModelCache name>` (the pod's localmodel label)
    /// (`StorageInitializerInjector.InjectStorageInitializer` @v0.17.0).
    pub(crate) fn local_model_by_hash(self) -> bool {
        self >= Release::V0_18_0
    }

    /// A `pvc://` URI is always mounted directly since v0.16; v0.15 copies
    /// it into the emptyDir through the storage-initializer unless
    /// `storageInitializer.enableDirectPvcVolumeMount` is true
    /// (`StorageInitializerInjector.InjectStorageInitializer` @v0.15.0).
    pub(crate) fn direct_pvc_always(self) -> bool {
        self >= Release::V0_16_0
    }

    /// Since v0.16 the model is mounted through `utils.AddModelMount`: a
    /// mount only in a container that mounts no volume of that name, the
    /// volume only beside a mount it adds. v0.15 appends the model volume and
    /// the model servers' mounts without looking
    /// (`StorageInitializerInjector.InjectStorageInitializer` @v0.15.0).
    /// Where that gives a pod the API server rejects (a second volume of one
    /// name, two mounts at one path), the pod gets HEAD's mounts instead.
    pub(crate) fn model_mounts_by_name(self) -> bool {
        self >= Release::V0_16_0
    }

    /// A direct PVC mount goes through every model container and adds the
    /// claim's volume since v0.16; v0.15 returns at the first model
    /// container that already mounts the claim (only where the pod has the
    /// claim's volume: [`Release::model_mounts_by_name`])
    /// (`StorageInitializerInjector.InjectStorageInitializer` @v0.15.0).
    pub(crate) fn direct_pvc_mount_completes(self) -> bool {
        self >= Release::V0_16_0
    }

    /// Since v0.16 the ClusterStorageContainer is looked up before any skip
    /// with the source URI as written; v0.15 looks it up only for an init
    /// container it builds, after the model puller and modelcar checks, with
    /// the URI it gives that container (a storage-spec placeholder
    /// resolved, a PVC copy's `/mnt/pvc/…` path), and writes KServe's
    /// missing-container error with the container's name
    /// (`StorageInitializerInjector.InjectStorageInitializer`,
    /// `GetContainerSpecForStorageUri` @v0.15.0).
    pub(crate) fn storage_container_lookup_first(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The CA bundle env and mount are added after the ClusterStorageContainer
    /// merge, where it left them absent, since v0.16; v0.15 appends them
    /// before the merge (`StorageInitializerInjector.InjectStorageInitializer`
    /// @v0.15.0).
    pub(crate) fn ca_bundle_after_merge(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The default Hugging Face env on every storage-initializer
    /// (`utils.AddDefaultHuggingFaceEnvVars`) since v0.16; v0.15 has none.
    pub(crate) fn hf_default_env(self) -> bool {
        self >= Release::V0_16_0
    }

    /// An HF Secret gives the token alone since v0.16; v0.15's gives
    /// `HF_HUB_ENABLE_HF_TRANSFER=1` after it (`hf.BuildSecretEnvs` @v0.15.0).
    pub(crate) fn hf_secret_token_only(self) -> bool {
        self >= Release::V0_16_0
    }

    /// S3 settings are read from the S3 Secret's data (between annotation
    /// and config) since v0.16; v0.15 reads annotation, else config, and
    /// has its own endpoint rules (`s3.BuildS3EnvVars` @v0.15.0).
    pub(crate) fn s3_secret_data(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The S3 endpoint env comes from the resolved settings (annotation,
    /// Secret data, config) since v0.16; v0.15 has its own endpoint rules
    /// (`s3.BuildS3EnvVars` @v0.15.0).
    pub(crate) fn s3_endpoint_resolved(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The Azure access-token Secret kind (a Secret with
    /// `AZURE_ACCESS_TOKEN` and no client id is an Azure Secret) since v0.16
    /// (`CredentialBuilder.mountSecretCredential` @v0.15.0 skips it).
    pub(crate) fn azure_access_token(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The Azure env since v0.16: the five variables and
    /// `AZURE_ACCESS_TOKEN`, `AZURE_ACCESS_EXPIRES_ON_SECONDS`,
    /// `AZURE_ACCOUNT_NAME`, `AZURE_SERVICE_URL`, each only where the Secret
    /// has its key (the tenant always); v0.15 refers to five, and leaves out
    /// only an absent client secret or storage key (`azure.BuildSecretEnvs`
    /// @v0.15.0).
    pub(crate) fn azure_env_of_present_keys(self) -> bool {
        self >= Release::V0_16_0
    }

    /// `internal.serving.kserve.io/storage-container-name` picks the
    /// ClusterStorageContainer since v0.20; before, it is ignored and the
    /// URI picks one (`GetStorageContainerSpec` @v0.19.0).
    pub(crate) fn explicit_storage_container(self) -> bool {
        self >= Release::V0_20_0
    }

    /// Confidential serving env (`applyConfidentialConfig`) since v0.20.
    pub(crate) fn confidential_env(self) -> bool {
        self >= Release::V0_20_0
    }

    /// A Secret with `MODELSCOPE_API_TOKEN` is a credential at HEAD only
    /// (`CredentialBuilder.mountSecretCredential` @v0.20.0 skips it).
    pub(crate) fn modelscope_credentials(self) -> bool {
        self >= Release::Head
    }

    /// S3 endpoint env since v0.17: trimmed, its scheme read, and
    /// `S3_USE_HTTPS` only beside an endpoint; before, `S3_USE_HTTPS`
    /// whenever set and the endpoint verbatim (`s3.BuildS3EnvVars` @v0.16.0).
    pub(crate) fn s3_endpoint_scheme(self) -> bool {
        self >= Release::V0_17_0
    }

    // --- OCI -----------------------------------------------------------------

    /// `oci+<mode>://` URIs (`ParseOciScheme`) since v0.20; before, only
    /// `oci://` is OCI and the rest is a plain storage URI.
    pub(crate) fn oci_mode_schemes(self) -> bool {
        self >= Release::V0_20_0
    }

    /// `ociModelMode` and `enableOciModelSupport` are read (and the mode
    /// validated) since v0.20; before, only `enableModelcar` turns OCI on
    /// (`Mutator.mutate` @v0.19.0).
    pub(crate) fn oci_mode_keys(self) -> bool {
        self >= Release::V0_20_0
    }

    /// An `ociModelMode` other than `modelcar`, `native`, `fetch` refuses
    /// the ConfigMap since v0.20 (`GetStorageInitializerConfigs` @v0.20.0).
    pub(crate) fn oci_model_mode_validated(self) -> bool {
        self >= Release::V0_20_0
    }

    /// The mode `fetch` is implemented at HEAD only; v0.20 parses it and
    /// injects a modelcar (`StorageInitializerInjector.InjectModelcar` @v0.20.0).
    pub(crate) fn oci_fetch(self) -> bool {
        self >= Release::Head
    }

    /// `storageInitializer.ociInsecureRegistry` is read at HEAD only
    /// (`types.StorageInitializerConfig` @v0.20.0 has no such key).
    pub(crate) fn oci_insecure_registry_key(self) -> bool {
        self >= Release::Head
    }

    /// The modelcar targets `worker-container` when there is no
    /// `kserve-container` since v0.17; before, the pod is denied
    /// (`StorageInitializerInjector.InjectModelcar` @v0.16.0).
    pub(crate) fn modelcar_worker_fallback(self) -> bool {
        self >= Release::V0_17_0
    }

    /// `cpuModelcar` and `memoryModelcar` may be left out, except under
    /// v0.16, which parses them always, so an absent one is a config error
    /// (`GetStorageInitializerConfigs` @v0.16.0); v0.15 falls back to
    /// `10m`/`15Mi` (`createModelContainer` @v0.15.0).
    pub(crate) fn modelcar_quantities_optional(self) -> bool {
        self != Release::V0_16_0
    }

    /// The transformer gets `MODEL_INIT_MODE` and `uidModelcar` as the model
    /// server does since v0.16; v0.15 gives it only the mount
    /// (`StorageInitializerInjector.InjectModelcar` @v0.15.0).
    pub(crate) fn modelcar_transformer_env(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The `storageInitializer` resource error names the key since v0.16;
    /// v0.15 writes `Failed to parse resource configuration for
    /// "storageInitializer": "<error>"` (`getStorageInitializerConfigs`
    /// @v0.15.0).
    pub(crate) fn storage_initializer_error_names_key(self) -> bool {
        self >= Release::V0_16_0
    }

    // --- agent ---------------------------------------------------------------

    /// The logger's storage (`logger.storage` and the InferenceService's
    /// `spec.predictor.logger`, which KServe GETs for it): the agent's
    /// `--log-store-path`/`--log-store-format` and the storage
    /// ServiceAccount's credentials, since v0.16; v0.15 neither reads the key
    /// nor fetches the InferenceService (`getLoggerConfigs`,
    /// `AgentInjector.InjectAgent`, `Mutator.Handle` @v0.15.0).
    pub(crate) fn logger_storage(self) -> bool {
        self >= Release::V0_16_0
    }

    /// The logger storage ServiceAccount's credentials on the agent since
    /// v0.16 (`AgentInjector.InjectAgent` @v0.15.0 adds only the pod's).
    pub(crate) fn logger_storage_credentials(self) -> bool {
        self >= Release::V0_16_0
    }

    /// `--metadata-annotations` from the pod's
    /// `internal.serving.kserve.io/logger-metadata-annotations` since
    /// v0.15.1 (kserve#4325: `AgentInjector.InjectAgent` @v0.15.1, the same
    /// code up to HEAD; @v0.15.0 there is no such flag, and the v0.15.0
    /// agent binary exits on it).
    pub(crate) fn logger_metadata_annotations(self) -> bool {
        self >= Release::V0_15_1
    }

    /// The logger's `marshallerUrl`, `batchSize`, `batchInterval` (config
    /// and InferenceService) since v0.17.
    pub(crate) fn logger_marshaller(self) -> bool {
        self >= Release::V0_17_0
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Release {
    type Err = ReleaseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Release::parse_any(text)
    }
}

/// The `0.17.1` an image tag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageRelease {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) patch: u32,
}

impl fmt::Display for ImageRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests;
