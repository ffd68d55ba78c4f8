use super::*;
use std::collections::HashMap;

const V1_MOUNTS: &str = "\
22 1 253:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
const V1_CGROUP: &str = "4:memory:/pods/web\n1:cpu:/\n0::/\n";

fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
    let map: HashMap<PathBuf, String> = entries
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    move |p: &Path| map.get(p).cloned()
}

#[test]
fn v1_memory_comes_first_and_the_lowest_limit_on_the_path_counts() {
    let dirs = limit_dirs(V1_MOUNTS, V1_CGROUP);
    assert_eq!(dirs[0].dir, PathBuf::from("/sys/fs/cgroup/memory/pods/web"));
    assert_eq!(dirs[1].dir, PathBuf::from("/sys/fs/cgroup/unified"));
    let read = files(&[
        (
            "/sys/fs/cgroup/memory/pods/web/memory.limit_in_bytes",
            "9223372036854771712\n",
        ),
        (
            "/sys/fs/cgroup/memory/pods/memory.limit_in_bytes",
            "134217728\n",
        ),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        ),
    ]);
    let limit = lowest_limit(&dirs, read).expect("a limit");
    assert_eq!(limit.bytes, 128 * MIB);
    assert_eq!(
        limit.file,
        PathBuf::from("/sys/fs/cgroup/memory/pods/memory.limit_in_bytes")
    );
}

#[test]
fn v2_in_a_cgroup_namespace_reads_the_mount_root() {
    let mounts = "40 30 0:30 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n";
    let dirs = limit_dirs(mounts, "0::/\n");
    assert_eq!(dirs.len(), 1);
    let read = files(&[("/sys/fs/cgroup/memory.max", "134217728\n")]);
    assert_eq!(lowest_limit(&dirs, read).map(|l| l.bytes), Some(128 * MIB));
    let read = files(&[("/sys/fs/cgroup/memory.max", "max\n")]);
    assert_eq!(lowest_limit(&dirs, read), None);
}

#[test]
fn a_subtree_mount_strips_its_root_from_the_process_path() {
    let mounts = "40 30 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    let dirs = limit_dirs(mounts, "0::/kubepods/pod1/ctr\n");
    assert_eq!(dirs[0].dir, PathBuf::from("/sys/fs/cgroup/ctr"));
    let read = files(&[("/sys/fs/cgroup/ctr/memory.max", "67108864")]);
    assert_eq!(lowest_limit(&dirs, read).map(|l| l.bytes), Some(64 * MIB));
}

#[test]
fn no_memory_hierarchy_means_no_limit() {
    let mounts = "31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
    assert!(limit_dirs(mounts, V1_CGROUP).is_empty());
}

/// `serve`'s limits with these three asked for and 8 streams a connection.
fn asked(
    max_connections: Option<usize>,
    max_buffered_bytes: Option<usize>,
    max_concurrent_requests: Option<usize>,
) -> LimitFlags {
    let flags = ["--http2-max-concurrent-streams", "8"];
    let args = crate::server::args::ServeArgs::try_parse_from(flags);
    let mut limits = args.expect("serve's defaults parse").limits;
    limits.max_connections = max_connections;
    limits.max_buffered_bytes = max_buffered_bytes;
    limits.max_concurrent_requests = max_concurrent_requests;
    limits
}

#[test]
fn the_shipped_limit_sizes_every_bound_to_fit_and_flags_win() {
    let sized = size(Some(128 * MIB), Some(1 << 20), &asked(None, None, None), 0);
    let streams = 8;
    let worst = cost::BASE
        + cost::ADMIN_LISTENER
        + cost::LARGEST_REVIEW * sized.large_reviews as u64
        + sized.max_concurrent_requests as u64 * cost::REQUEST
        + sized.max_buffered_bytes as u64
        + sized.max_connections as u64 * (cost::CONNECTION + streams * cost::STREAM);
    assert!(
        worst <= 128 * MIB * (100 - HEADROOM_PERCENT) / 100,
        "worst case {worst} over the plan for 128 MiB: {sized:?}"
    );
    assert!(sized.max_connections >= 60, "{sized:?}");
    assert!(sized.max_buffered_bytes >= crate::limits::MAX_BODY_BYTES);
    // Every connection's streams may be in flight at once.
    assert_eq!(
        sized.max_concurrent_requests,
        sized.max_connections * streams as usize
    );

    let unlimited = size(None, Some(1 << 20), &asked(None, None, None), 0);
    assert_eq!(unlimited.max_connections, MAX_CONNECTIONS);
    assert_eq!(unlimited.max_buffered_bytes, MAX_BUFFERED_BYTES);

    let flags = size(
        Some(128 * MIB),
        Some(1 << 20),
        &asked(Some(7), Some(9 << 20), None),
        0,
    );
    assert_eq!(
        (flags.max_connections, flags.max_buffered_bytes),
        (7, 9 << 20)
    );
    assert_eq!(flags.max_concurrent_requests, 56);

    // What fits 256 descriptors with the admin listener's 32, the API
    // client's 64, 32 others and a tenth of headroom.
    let files = size(None, Some(256), &asked(None, None, None), 0);
    assert_eq!(files.max_connections, 104);
    assert_eq!(fds::needed(104), 256);
    assert!(check_files(Some(256), Some(256), 104, false).is_ok());
    let refused = check_files(Some(256), Some(256), 105, true);
    assert_eq!(refused.map_err(|e| e.to_string()), Err("the open-file limit (256, hard 256) is too low: 105 webhook connections (--max-connections) + 32 admin connections + 64 for the API client + 32 for files, listeners and the runtime = 233, plus a tenth as headroom = 257 file descriptors; raise the limit (ulimit -n, the container runtime's nofile) or lower --max-connections".to_string()));
    assert_eq!(
        size(None, Some(1024), &asked(None, None, None), 0).max_connections,
        802
    );
    // Too few for the fewest connections served: refused even unasked.
    let few = size(None, Some(100), &asked(None, None, None), 0);
    assert_eq!(few.max_connections, 16);
    assert!(check_files(Some(100), Some(100), 16, false).is_err());
}

#[test]
fn requests_given_apart_are_planned_apart() {
    let sized = size(
        Some(128 * MIB),
        Some(1 << 20),
        &asked(None, None, Some(512)),
        0,
    );
    assert_eq!(sized.max_concurrent_requests, 512);
    let worst = cost::BASE
        + cost::ADMIN_LISTENER
        + cost::LARGEST_REVIEW
        + 512 * cost::REQUEST
        + sized.max_buffered_bytes as u64
        + sized.max_connections as u64 * (cost::CONNECTION + 8 * cost::STREAM);
    assert!(worst <= 96 * MIB, "{worst} for {sized:?}");
}

#[test]
fn with_lookups_the_caches_budget_comes_first_and_everything_still_fits() {
    let limit = Some(128 * MIB);
    let caches = cache_budget(limit, &asked(None, None, Some(512))).unwrap();
    let sized = size(limit, Some(1 << 20), &asked(None, None, Some(512)), caches);
    let worst = cost::BASE
        + cost::ADMIN_LISTENER
        + cost::LARGEST_REVIEW
        + 512 * cost::REQUEST
        + caches
        + sized.max_buffered_bytes as u64
        + sized.max_connections as u64 * (cost::CONNECTION + 8 * cost::STREAM);
    assert!(worst <= 96 * MIB, "{worst} {sized:?}");
    // 40 % of the 41 MiB left after the process, the admin listener, a
    // largest review and 512 requests.
    assert_eq!(caches / (1 << 10), 41 * 1024 * 40 / 100);
    // 24.6 MiB left: 6.15 MiB of it clamped up to 7 MiB of byte budget,
    // the rest at 480 KiB a connection (8 streams of 16 KiB each).
    assert_eq!(sized.max_connections, 37, "{sized:?}");
    assert_eq!(cache_budget(None, &asked(None, None, Some(512))), None);
}

#[test]
fn with_lookups_and_derived_requests_the_caches_come_first_and_everything_fits() {
    let limit = Some(128 * MIB);
    let caches = cache_budget(limit, &asked(None, None, None)).unwrap();
    let sized = size(limit, Some(1 << 20), &asked(None, None, None), caches);
    let worst = cost::BASE
        + cost::ADMIN_LISTENER
        + cost::LARGEST_REVIEW
        + caches
        + sized.max_buffered_bytes as u64
        + sized.max_connections as u64 * (cost::CONNECTION + 8 * (cost::STREAM + cost::REQUEST));
    assert!(worst <= 96 * MIB, "{worst} {sized:?}");
    // 40 % of the 49 MiB left after the process, the admin listener and a
    // largest review.
    assert_eq!(caches / (1 << 10), 49 * 1024 * 40 / 100);
    // The rest: a quarter to the byte budget, 608 KiB a connection.
    assert_eq!(sized.max_connections, 37, "{sized:?}");
    assert_eq!(sized.max_concurrent_requests, 37 * 8);
}

#[test]
fn the_lookups_bytes_are_a_quarter_of_the_caches_budget_unless_given() {
    let caches = cache_budget(Some(128 * MIB), &asked(None, None, None));
    let (watch, pool) = lookup_bytes(caches, None);
    assert_eq!(pool as u64, caches.unwrap() / 4);
    // The caches' set-aside is unchanged: the pool is part of it.
    assert_eq!(watch.unwrap() + pool as u64, caches.unwrap());
    assert_eq!(lookup_bytes(caches, Some(1 << 20)).1, 1 << 20);
    assert_eq!(
        lookup_bytes(None, None),
        (None, crate::lookups::DEFAULT_LOOKUP_BYTES)
    );
}
