use super::*;
use crate::cluster::storage_container::{select, StorageContainerError};
use crate::cluster::ClusterSnapshot;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

fn csc(
    name: &str,
    formats: &[UriFormat],
    disabled: bool,
    workload: &str,
) -> ClusterStorageContainer {
    let formats = formats.to_vec().into_boxed_slice();
    ClusterStorageContainer::new(
        name,
        &Default::default(),
        formats,
        workload,
        disabled,
        false,
    )
    .unwrap()
}

fn prefix(p: &str) -> UriFormat {
    UriFormat::new(Some(p), None)
}

fn regex(r: &str) -> UriFormat {
    UriFormat::new(None, Some(r))
}

fn names<'a>(set: &'a StorageContainers, uri: &str) -> Vec<&'a str> {
    set.candidates(uri).map(|c| c.name()).collect()
}

/// KServe's loop over every CSC in name order (`GetStorageContainerSpec`),
/// as `select` read the snapshot before the index.
fn linear<'a>(
    set: &'a StorageContainers,
    uri: &str,
) -> Result<Option<&'a ClusterStorageContainer>, StorageContainerError> {
    for csc in set.iter() {
        if csc.disabled || csc.workload_type() != INIT_CONTAINER_WORKLOAD {
            continue;
        }
        if csc.supports(uri)? {
            return Ok(Some(csc));
        }
    }
    Ok(None)
}

#[test]
fn only_what_can_match_is_a_candidate() {
    let set: StorageContainers = [
        csc("a-s3", &[prefix("s3://")], false, "initContainer"),
        csc(
            "b-bucket",
            &[prefix("s3://bucket-7/")],
            false,
            "initContainer",
        ),
        csc(
            "c-azure",
            &[regex("https://(.+?).blob.core.windows.net/(.+)")],
            false,
            "initContainer",
        ),
        csc(
            "d-anchored",
            &[regex(r"^gs://team-\d+/")],
            false,
            "initContainer",
        ),
        csc("e-any", &[regex(r"\d+$")], false, "initContainer"),
        csc("f-invalid", &[regex("(")], false, "initContainer"),
        csc("g-disabled", &[prefix("s3://")], true, "initContainer"),
        csc("h-job", &[prefix("s3://")], false, "localModelDownloadJob"),
        csc("i-empty", &[UriFormat::Empty], false, "initContainer"),
    ]
    .into_iter()
    .collect();
    // `\d+$` starts with no literal, and `(` fails on any URI: both are
    // read for every URI.
    let always = ["e-any", "f-invalid"];
    let with = |some: &[&'static str]| [some, &always[..]].concat();
    assert_eq!(names(&set, "s3://bucket-7/m"), with(&["a-s3", "b-bucket"]));
    assert_eq!(names(&set, "s3://other/m"), with(&["a-s3"]));
    assert_eq!(
        names(&set, "https://acct.blob.core.windows.net/c/m"),
        with(&["c-azure"])
    );
    // Unanchored: the literal may appear anywhere.
    assert_eq!(names(&set, "x+https://a"), with(&["c-azure"]));
    assert_eq!(names(&set, "gs://team-12/m"), with(&["d-anchored"]));
    assert_eq!(names(&set, "x/gs://team-12/m"), always);
    assert_eq!(names(&set, "pvc://claim/m1"), always);
    // Every CSC is still held, for explicit selection by name.
    assert_eq!(set.len(), 9);
    assert!(set.get("g-disabled").is_some());
}

#[test]
fn a_change_rebuilds_the_index_and_a_clone_shares_it() {
    let mut set: StorageContainers = [csc("a", &[prefix("s3://")], false, "initContainer")]
        .into_iter()
        .collect();
    assert_eq!(names(&set, "s3://m"), ["a"]);
    let shared = set.clone();
    assert!(shared.shares(&set));
    set.insert(csc("b", &[prefix("s3://m")], false, "initContainer"));
    assert!(!shared.shares(&set));
    assert_eq!(names(&set, "s3://m"), ["a", "b"]);
    assert_eq!(names(&shared, "s3://m"), ["a"]);
    set.remove("a");
    assert_eq!(names(&set, "s3://m"), ["b"]);
}

/// Thousands of CSCs: a URI's candidates are the few that can match it.
#[test]
fn candidates_do_not_grow_with_the_cluster() {
    let set: StorageContainers = (0..5_000)
        .map(|i| {
            let format = match i % 10 {
                0 => regex(&format!(r"^s3://team-{i}-[a-z]+/")),
                1 => regex(&format!(r"https://team{i}\.blob\.core\.windows\.net/.+")),
                _ => prefix(&format!("s3://bucket-{i}/")),
            };
            csc(&format!("csc-{i:05}"), &[format], false, "initContainer")
        })
        .collect();
    assert_eq!(names(&set, "s3://bucket-4242/model"), ["csc-04242"]);
    assert_eq!(names(&set, "s3://team-4240-abc/model"), ["csc-04240"]);
    assert_eq!(
        names(&set, "https://team4241.blob.core.windows.net/c/m"),
        ["csc-04241"]
    );
    assert!(names(&set, "gs://elsewhere/m").is_empty());
}

const PREFIXES: [&str; 6] = ["s3://", "s3://bucket", "gs://", "hf://", "https://", "é"];
const REGEXES: [&str; 16] = [
    r"^s3://b[0-9]+/",
    "https://(.+?).blob.core.windows.net/(.+)",
    "(?i)S3://",
    ".*",
    "bucket",
    "(",
    r"^(gs|s3)://x",
    r"\d+$",
    "^$",
    "(?m)^s3",
    "é",
    "^é+",
    "^[a-c]{2}://",
    r"\As3://bucket",
    "^a|s3",
    "^(?:hf|gs)://[a-z]{0,3}m",
];
const URIS: [&str; 14] = [
    "s3://bucket/m",
    "s3://b12/m",
    "S3://bucket",
    "gs://xm",
    "gs://m",
    "hf://abm",
    "https://acct.blob.core.windows.net/c/m",
    "x https://a.blob.core.windows.net/b",
    "ab://m1",
    "",
    "éé",
    "pvc://c/p",
    "a\ns3://m",
    "ccc://",
];

fn format() -> impl Strategy<Value = UriFormat> {
    prop_oneof![
        prop::sample::select(&PREFIXES[..]).prop_map(prefix),
        prop::sample::select(&REGEXES[..]).prop_map(regex),
        Just(UriFormat::Empty),
    ]
}

fn sets() -> impl Strategy<Value = Vec<ClusterStorageContainer>> {
    let one = (
        prop::collection::vec(format(), 0..4),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
    );
    prop::collection::vec(one, 0..12).prop_map(|cscs| {
        (cscs.into_iter().enumerate())
            .map(|(i, (formats, disabled, job))| {
                let workload = if job {
                    "localModelDownloadJob"
                } else {
                    "initContainer"
                };
                csc(&format!("c{i:02}"), &formats, disabled, workload)
            })
            .collect()
    })
}

/// The index changes what is read, never what is chosen: `select` gives
/// what KServe's loop over every CSC gives (the CSC, `None`, or the same
/// error), for every URI.
#[test]
fn selection_through_the_index_is_kserves_loop() {
    let config = RunnerConfig {
        cases: 2_000,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..RunnerConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, b"kserve-csc-index");
    let mut runner = TestRunner::new_with_rng(config, rng);
    let uri = prop_oneof![
        prop::sample::select(&URIS[..]).prop_map(str::to_string),
        "[a-z0-9:/.é]{0,12}",
    ];
    let result = runner.run(&(sets(), uri), |(cscs, uri)| {
        let data = ClusterSnapshot {
            storage_containers: cscs.into_iter().collect(),
            ..ClusterSnapshot::default()
        };
        let want = linear(&data.storage_containers, &uri).map(|c| c.map(|c| c.name.clone()));
        let got = select(&data, &uri, None).map(|c| c.map(|c| c.name.clone()));
        prop_assert_eq!(format!("{got:?}"), format!("{want:?}"));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
