//! Property tests for reinvocation (`reinvocationPolicy: IfNeeded`): random
//! pods go through the pipeline, through random "other webhook" mutations,
//! and through the pipeline again.
//!
//! Properties (one file each, each with its own fixed seed):
//! * `reinvocation_is_stable`: (a) every patch applies to the object it was
//!   computed for and yields exactly `Mutation.pod`; (b) no duplicate names
//!   (containers and init containers together, volumes, and per container
//!   mounts, env and named ports); (c) a pass on our own output returns an
//!   empty patch, and after neutral webhooks too; after webhooks that change
//!   what an injector reads (Istio CNI annotations, a GPU limit) the next pass
//!   only touches what that injector owns and the pass after it is empty;
//!   (d) unknown fields survive every pass unchanged and no patch operation
//!   reaches into them; (e) a pass after a successful pass never fails.
//! * `removed_field_is_repaired_without_side_effects` and
//!   `removed_container_is_repaired_without_side_effects`: a webhook removes
//!   one thing pass 1 added (a field, or a whole container); the next pass
//!   writes only what pass 1 had, exactly as pass 1 had it (a named entry it
//!   puts back is identical; it may also leave the removal alone, as the
//!   "already injected" guards do), keeps (a), (b), (d), (e), and the pass
//!   after it is empty.
//! * `the_working_set_edits_as_the_oracle_does` (`editors.rs`): (g) the
//!   test oracle (the `kserve-injector-oracle` crate), an independent
//!   editor of the whole pod as a JSON tree, and the working set the
//!   injectors edit run the same random script of the injectors' calls on
//!   each generated pod and on what a pass made of it: every read answers
//!   alike, and the pod plus the working set's patch is exactly the
//!   oracle's pod, with the same operations.
//! * `restricted_profile_passes_the_checker` (`restricted.rs`): under
//!   `--security-profile restricted` no container a pass adds violates the
//!   restricted Pod Security Standard, and under `baseline` every pass that
//!   adds one does (the checker can fail).
//! * `model_volume_is_used_and_stable` (`model_volume.rs`): with a
//!   `modelVolume` source configured, the storage-initializer's volume is
//!   that source, a pod's own volume of that name is kept, `pvc://` mounts
//!   its claim, and reinvocation changes nothing.
//! * `review_agrees_with_mutate`: (f) `admission::prepare` and `answer` never panic, on
//!   valid and on schema-invalid pods, and answers exactly what `mutate` says.
//! * `upgrading_to_the_running_release_changes_nothing` and
//!   `the_changes_are_the_difference_and_each_has_a_row` (`upgrade.rs`):
//!   `audit --upgrade-to` between releases, on these pods and on the
//!   cluster cases of `lookups.rs`.
//!
//! Every property runs once per profile: each `--kserve-version` the flag
//! accepts ([`Release::SUPPORTED`]; its environments are that release's
//! own shipped defaults, bare and edited, and HEAD's ConfigMap edited, all
//! read as that release reads them), each in both `--modelcar-mode`s. A property's case
//! count per mode is split between the releases. The
//! generated pods carry the `kserve-injector.io/modelcar-mode` annotation
//! (either mode, or a value naming none), a modelcar already present in
//! either shape, and other webhooks that set the annotation after the
//! modelcar is in. Besides (a) to (f), each pass that adds a modelcar adds it
//! in the shape the rule gives ([`check_modelcar_shape`]).
//!
//! Runs are deterministic: each property uses proptest's XorShift RNG seeded
//! from [`SEED`] (the property's index, plus 16 in native-sidecar mode, plus
//! 32 times the release's index, is XORed into the last two bytes) and
//! prints seed and case count. XorShift rather than ChaCha because ChaCha in
//! an unoptimised test build made case generation 3–4 times slower and the
//! file must stay within its CI time budget. `KSERVE_PROPTEST_SEED=<32 hex
//! digits>` explores another seed.
//! Shrinking stays on (bounded by `max_shrink_time`) because a minimal pod is
//! what makes a failure reportable; failure persistence is off so that no
//! regression files are written into the repository.

use base64::Engine;
use kserve_injector_core::cluster::Secret;
use kserve_injector_core::constants::*;
use kserve_injector_core::{
    admission, config::Config, mutate, release::Release, Inputs, Mutation, MutationError,
};
use kserve_injector_core::{InjectorOutcome, ModelcarMode, Op, OpKind};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{
    Config as RunnerConfig, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The CI seed (XorShift takes 16 bytes).
const SEED: &[u8; 16] = b"kserve-reinvoke1";

const STABLE_CASES: u32 = 4_000;
const FIELD_REMOVAL_CASES: u32 = 2_500;
const CONTAINER_REMOVAL_CASES: u32 = 1_500;
const REVIEW_CASES: u32 = 2_000;
/// Per modelcar mode: 10,000 generated pods per run in restricted mode.
const RESTRICTED_CASES: u32 = 5_000;
const MODEL_VOLUME_CASES: u32 = 1_500;

// ---------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------

/// The seed of a property: its index (with the profile's offset) XORed
/// into the last two bytes.
fn seed_for(property: u16) -> [u8; 16] {
    let mut seed = *SEED;
    if let Ok(hex) = std::env::var("KSERVE_PROPTEST_SEED") {
        let hex = hex.trim();
        assert!(
            hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
            "KSERVE_PROPTEST_SEED must be 32 hex digits"
        );
        for (i, byte) in seed.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_default();
        }
    }
    let [high, low] = property.to_be_bytes();
    seed[14] ^= high;
    seed[15] ^= low;
    seed
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A KServe release and a modelcar mode: what the properties run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Profile {
    pub(super) release: Release,
    pub(super) mode: ModelcarMode,
}

impl Profile {
    /// Every supported release in both modes, oldest release first.
    fn all() -> Vec<Profile> {
        (Release::SUPPORTED.iter())
            .flat_map(|&release| ModelcarMode::ALL.map(|mode| Profile { release, mode }))
            .collect()
    }

    /// XORed into the seed with the property's index; HEAD's is 0 in
    /// classic mode, so its cases are the first of the seed's.
    fn seed_offset(self) -> u16 {
        let release = (Release::SUPPORTED.iter().rev()).position(|r| *r == self.release);
        16 * (self.mode == ModelcarMode::NativeSidecar) as u16 + 32 * release.unwrap_or(0) as u16
    }

    /// A property's count per mode, split between the releases.
    fn share(cases: u32) -> u32 {
        cases.div_ceil(Release::SUPPORTED.len() as u32)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--kserve-version {} --modelcar-mode {}",
            self.release, self.mode
        )
    }
}

/// [`run_property`] once per [`Profile`], each with its share of `cases`
/// cases of the strategy `strategy(profile)` makes (pods in that
/// profile's environments).
fn run_per_mode<S>(
    name: &str,
    property: u16,
    cases: u32,
    strategy: impl Fn(Profile) -> S,
    test: impl Fn(Profile, S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: fmt::Debug,
{
    for profile in Profile::all() {
        let property = property + profile.seed_offset();
        let name = format!("{name} [{profile}]");
        let cases = Profile::share(cases);
        run_property(&name, property, cases, strategy(profile), |v| {
            test(profile, v)
        });
    }
}

/// Runs `test` on `cases` generated cases with a fixed seed, printing
/// the seed, the count and the time; panics with the minimal failing case.
fn run_property<S>(
    name: &str,
    property: u16,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: fmt::Debug,
{
    let seed = seed_for(property);
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        max_shrink_time: 30_000,
        max_shrink_iters: 4_096,
        ..RunnerConfig::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::XorShift, &seed));
    let started = Instant::now();
    let result = runner.run(&strategy, test);
    println!(
        "proptest {name}: seed {} (XorShift), {cases} cases, {:.1?}",
        hex(&seed),
        started.elapsed()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
        Err(TestError::Fail(why, input)) => {
            panic!("{name}: {why}\nminimal failing input:\n{input:?}")
        }
    }
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

// ---------------------------------------------------------------------------
// Environments
// ---------------------------------------------------------------------------

const NAMESPACES: [&str; 3] = ["default", "kserve", "team-a"];

/// What each environment of [`envs`] is, in order, for failure reports.
const ENV_NAMES: [&str; 5] = [
    "the release's shipped defaults (from v0.15.2 modelcar mode, uidModelcar 1010; v0.15.0 and v0.15.1 no OCI)",
    "ociModelMode native",
    "ociModelMode fetch, caBundleConfigMapName custom-ca, ociInsecureRegistry",
    "OCI support off, aggregation and scraping on, logger caBundle logger-ca, PVC copy (v0.15)",
    "the release's defaults + aggregation on, caBundleConfigMapName custom-ca, storage-config secret in team-a",
];

/// [`ENV_NAMES`]' environments under each [`Profile`], in
/// [`Profile::all`]'s order: the config read as that release reads it.
fn envs() -> &'static [Inputs] {
    static ENVS: OnceLock<Vec<Inputs>> = OnceLock::new();
    ENVS.get_or_init(|| {
        let mut all = Vec::new();
        for profile in Profile::all() {
            all.extend(classic_envs(profile.release).into_iter().map(|mut env| {
                let config = env.config.as_ref().clone().for_release(profile.release);
                env.edit_config(|c| *c = config);
                env.modelcar_mode = profile.mode;
                env
            }));
        }
        all
    })
}

/// The indices of [`envs`] under `profile`.
fn envs_in(profile: Profile) -> std::ops::Range<usize> {
    let at = (Profile::all().iter())
        .position(|p| *p == profile)
        .unwrap_or_default();
    at * ENV_NAMES.len()..(at + 1) * ENV_NAMES.len()
}

fn env_name(index: usize) -> String {
    let env = &envs()[index];
    format!(
        "{}, --kserve-version {} --modelcar-mode {}",
        ENV_NAMES[index % ENV_NAMES.len()],
        env.config.release(),
        env.modelcar_mode
    )
}

/// The environments of `release`: its own shipped defaults (first and
/// last), and HEAD's ConfigMap edited (the others), so that every release
/// also meets the OCI modes whichever its defaults turn on.
fn classic_envs(release: Release) -> Vec<Inputs> {
    let shipped = Config::shipped(release);
    let base = Config::default();
    let edit = |f: &dyn Fn(&mut Config)| {
        let mut config = base.clone();
        f(&mut config);
        Inputs::new(config)
    };
    let mut with_ca = shipped.clone();
    with_ca.metrics_aggregator.enable_metric_aggregation = "true".into();
    with_ca.storage_initializer.ca_bundle_config_map_name = "custom-ca".into();
    let mut with_secrets = Inputs::new(with_ca);
    with_secrets.cluster.insert_secret(Secret::from_data(
        "team-a",
        "storage-config",
        [
            (
                "default",
                r#"{"type":"s3","bucket":"models","cabundle_configmap":"s3-ca"}"#,
            ),
            ("default_s3", r#"{"type":"s3","bucket":"models"}"#),
        ],
    ));
    vec![
        Inputs::new(shipped),
        edit(&|c| c.storage_initializer.oci_model_mode = "native".into()),
        edit(&|c| {
            c.storage_initializer.oci_model_mode = "fetch".into();
            c.storage_initializer.ca_bundle_config_map_name = "custom-ca".into();
            c.storage_initializer.oci_insecure_registry = true;
        }),
        // No OCI support: oci:// goes to the storage initializer.
        edit(&|c| {
            c.storage_initializer.enable_modelcar = false;
            c.storage_initializer.enable_oci_model_support = false;
            c.storage_initializer.oci_model_mode = String::new();
            c.storage_initializer.uid_modelcar = None;
            c.metrics_aggregator.enable_metric_aggregation = "true".into();
            c.metrics_aggregator.enable_prometheus_scraping = "true".into();
            c.logger.ca_bundle = "logger-ca".into();
            // `enableDirectPvcVolumeMount` left out: v0.15 copies a PVC
            // (the other releases clear it, `Config::for_release`).
            c.storage_initializer.pvc_copy_mode = true;
        }),
        with_secrets,
    ]
}

mod checks;
mod editors;
mod gen_containers;
mod gen_pods;
mod model_volume;
mod others;
mod removal;
mod restricted;
mod review;
mod stable;
mod upgrade;
mod upgrade_checks;

use checks::*;
use gen_containers::*;
use gen_pods::*;
use others::*;

#[test]
fn case_count_meets_the_ci_budget() {
    // Each property runs its count once per mode, split between the
    // releases (`run_per_mode`).
    let per_mode = STABLE_CASES + FIELD_REMOVAL_CASES + CONTAINER_REMOVAL_CASES + REVIEW_CASES;
    let modes = ModelcarMode::ALL.len() as u32;
    let releases = Release::SUPPORTED.len() as u32;
    let per_profile: u32 = [
        STABLE_CASES,
        FIELD_REMOVAL_CASES,
        CONTAINER_REMOVAL_CASES,
        REVIEW_CASES,
    ]
    .map(Profile::share)
    .iter()
    .sum();
    println!(
        "proptest total: {per_mode} cases per modelcar mode ({per_profile} per release), {} per run, base seed {}",
        per_profile * modes * releases,
        hex(SEED)
    );
    assert!(per_mode >= 10_000);
    assert!(per_profile * releases >= per_mode);
    assert_eq!(
        envs().len(),
        Profile::all().len() * ENV_NAMES.len(),
        "each env in each profile"
    );
    // Every profile has its own seed.
    let mut offsets: Vec<u16> = Profile::all().iter().map(|p| p.seed_offset()).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), Profile::all().len());
}
