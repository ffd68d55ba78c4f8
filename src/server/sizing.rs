//! The server's bounds sized to the memory it may use: the container's
//! memory limit, read from its cgroup at start (v2 `memory.max`, v1
//! `memory.limit_in_bytes`, the lowest along the path to the hierarchy's
//! root), so that every bound at its worst together stays under the limit
//! with headroom. A flag given on the command line wins; the figures are
//! logged at start. The arithmetic, with the measured costs it rests on, is
//! in docs/operations.md ("Memory").

use super::limits::{Limits, Pace};
use crate::server::args::LimitFlags;
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

/// Measured costs (docs/operations.md, "Memory"; `python3
/// loadtest/memory_costs.py`), each rounded up.
pub(crate) mod cost {
    use super::MIB;

    /// The process serving nothing, resident: binary, runtime, config, TLS
    /// config, metrics, logging, the allocator's own pages (measured 18 MiB).
    pub(crate) const BASE: u64 = 24 * MIB;
    /// One connection at its worst, besides its streams: idle HTTP/2 after
    /// a review (measured 37 KiB), what a client may send ahead (64 KiB
    /// window), what hyper, h2 and rustls hold for a client that does not
    /// read (three 16 KiB buffers), the kernel's send buffer (128 KiB, which
    /// cgroup v2 charges to the container), and the bytes its requests and
    /// answers may hold of their own (`share::OWN_BYTES`, 64 KiB).
    pub(crate) const CONNECTION: u64 = 352 * 1024;
    /// One HTTP/2 stream at its worst (a connection has
    /// `--http2-max-concurrent-streams`): its state with an answer waiting
    /// (9 KiB) and what h2 may hold of an answer handed to it whole for a
    /// client that withholds its window (`answer::HANDED_WHOLE`, 4 KiB).
    pub(crate) const STREAM: u64 = 16 * 1024;
    /// One request in flight besides its body: the review's state.
    pub(crate) const REQUEST: u64 = 16 * 1024;
    /// One review of the largest body (7 MiB) at its peak, its body and
    /// answer included (measured 15.6 MiB).
    pub(crate) const LARGEST_REVIEW: u64 = 20 * MIB;
    /// One admin connection at its worst: hyper's 8 KiB read and write
    /// buffers, a `/metrics` rendering its client does not read, the
    /// kernel's send and receive buffers (16 and 8 KiB set, doubled), its
    /// task and state (`admin/listener.rs`).
    pub(crate) const ADMIN_CONNECTION: u64 = 96 * 1024;
    /// The admin listener at its worst: every connection it admits.
    pub(crate) const ADMIN_LISTENER: u64 =
        super::super::limits::ADMIN_CONNECTIONS as u64 * ADMIN_CONNECTION;
}

/// File descriptors besides the webhook's connections, planned like
/// memory (docs/operations.md, "File descriptors").
pub(crate) mod fds {
    /// The admin listener's connections.
    pub(crate) const ADMIN: u64 = super::super::limits::ADMIN_CONNECTIONS as u64;
    /// The API client's connections (watches and the GETs of objects the
    /// caches do not hold).
    pub(crate) const API_CLIENT: u64 = 64;
    /// Standard streams, the two listeners, both runtimes' epoll and wake
    /// descriptors, inotify, the signal pipe, and the files read at a
    /// reload or at start (one at a time).
    pub(crate) const FIXED: u64 = 32;
    /// Of the limit, a part in this many is headroom.
    pub(crate) const HEADROOM_PARTS: u64 = 10;

    /// Descriptors `connections` webhook connections need with the rest,
    /// headroom included.
    pub(crate) fn needed(connections: u64) -> u64 {
        let planned = connections + ADMIN + API_CLIENT + FIXED;
        planned + planned.div_ceil(HEADROOM_PARTS)
    }

    /// The most webhook connections that fit `limit` descriptors.
    pub(crate) fn connections(limit: u64) -> u64 {
        let mut planned = limit.saturating_mul(HEADROOM_PARTS) / (HEADROOM_PARTS + 1) + 1;
        while planned > 0 && planned + planned.div_ceil(HEADROOM_PARTS) > limit {
            planned -= 1;
        }
        planned.saturating_sub(ADMIN + API_CLIENT + FIXED)
    }
}

/// The open-file limit cannot hold the connections asked for (or the
/// fewest the server runs with).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the open-file limit ({limit}, hard {hard}) is too low: {connections} webhook connections{asked} \
     + {admin} admin connections + {api} for the API client + {fixed} for files, listeners and \
     the runtime = {planned}, plus a tenth as headroom = {needed} file descriptors; raise the \
     limit (ulimit -n, the container runtime's nofile) or lower --max-connections",
    admin = fds::ADMIN,
    api = fds::API_CLIENT,
    fixed = fds::FIXED,
    planned = connections + fds::ADMIN + fds::API_CLIENT + fds::FIXED,
    needed = fds::needed(*connections),
    asked = if *given { " (--max-connections)" } else { " (the fewest served)" },
    hard = hard.map_or("unlimited".to_string(), |h| h.to_string()),
)]
pub struct TooFewFiles {
    pub limit: u64,
    pub hard: Option<u64>,
    pub connections: u64,
    pub given: bool,
}

/// Whether `connections` fit the open-file limit `nofile` (`None`: none).
pub(crate) fn check_files(
    nofile: Option<u64>,
    hard: Option<u64>,
    connections: usize,
    given: bool,
) -> Result<(), TooFewFiles> {
    match nofile {
        Some(limit) if fds::needed(connections as u64) > limit => Err(TooFewFiles {
            limit,
            hard,
            connections: connections as u64,
            given,
        }),
        _ => Ok(()),
    }
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does
/// since 1.19): the soft limit a container starts with (often 1024) is a
/// default for programs that use `select(2)`, not a budget. Returns the
/// soft and hard limits after (`None`: unlimited).
pub(crate) fn raise_nofile() -> (Option<u64>, Option<u64>) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some() && limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return (limit.maximum, limit.maximum);
        }
    }
    (limit.current, limit.maximum)
}

/// Of the limit, what is never planned for: the allocator's fragmentation,
/// the kernel's share and anything not measured.
const HEADROOM_PERCENT: u64 = 25;

/// Without a limit (or with one too high to matter), the bounds are these.
pub(crate) const MAX_CONNECTIONS: usize = 4096;
pub(crate) const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// A memory limit and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryLimit {
    pub bytes: u64,
    pub file: PathBuf,
}

/// Of what is left once the process, one largest review and the requests
/// in flight are planned for, the share the watch caches get (when there
/// are cluster lookups): `src/lookups/budget.rs` splits it among the
/// watched kinds.
const CACHES_PERCENT: u64 = 40;

/// The watch caches' budget under `limit` (`None` without a limit). The
/// requests in flight are planned apart only when `--max-concurrent-requests`
/// is given; otherwise they are each connection's streams, planned with the
/// connections out of what the caches leave.
pub(crate) fn cache_budget(limit: Option<u64>, asked: &LimitFlags) -> Option<u64> {
    let apart = asked
        .max_concurrent_requests
        .map_or(0, |r| r as u64 * cost::REQUEST);
    limit.map(|l| {
        let usable = l - l * HEADROOM_PERCENT / 100;
        let fixed = cost::BASE + cost::ADMIN_LISTENER + cost::LARGEST_REVIEW;
        let plannable = usable.saturating_sub(fixed + apart);
        plannable * CACHES_PERCENT / 100
    })
}

/// Of the caches' budget (`caches`, `None` without a limit), the bytes the
/// admissions' GETs may hold (`src/lookups/shares.rs`): `asked` when
/// `--max-lookup-bytes` is given, else a quarter of it; the watch caches
/// keep the rest. Without a limit the pool is the lookups' default.
pub(crate) fn lookup_bytes(caches: Option<u64>, asked: Option<usize>) -> (Option<u64>, usize) {
    let pool = asked.unwrap_or(match caches {
        Some(c) => (c / 4) as usize,
        None => crate::lookups::DEFAULT_LOOKUP_BYTES,
    });
    (caches.map(|c| c.saturating_sub(pool as u64)), pool)
}

/// The bounds for `limit`, the flags' values where they are given, else: of what is
/// left once the process and one largest review are planned for, the byte
/// budget takes a quarter and connections the rest, each with its streams
/// and (unless `--max-concurrent-requests` is given, then planned apart) a
/// request in flight on every stream; `nofile` (the open-file limit) caps
/// connections at what fits it with the other descriptors and headroom
/// ([`fds`]), so the cap is reached before accept() fails.
/// `caches` bytes (the watch caches' budget) are set aside first. The
/// timeouts are the flags' as they are.
pub(crate) fn size(
    limit: Option<u64>,
    nofile: Option<u64>,
    asked: &LimitFlags,
    caches: u64,
) -> Limits {
    let by_files = nofile.map_or(MAX_CONNECTIONS as u64, fds::connections);
    let streams = u64::from(asked.http2_max_concurrent_streams);
    let requests = asked.max_concurrent_requests.map(|r| r as u64);
    // Requests in flight are each connection's streams unless given apart.
    let per_connection = match requests {
        Some(_) => cost::CONNECTION + streams * cost::STREAM,
        None => cost::CONNECTION + streams * (cost::STREAM + cost::REQUEST),
    };
    let plannable = limit.map(|l| {
        let usable = l - l * HEADROOM_PERCENT / 100;
        let apart = requests.map_or(0, |r| r * cost::REQUEST);
        let fixed = cost::BASE + cost::ADMIN_LISTENER + cost::LARGEST_REVIEW;
        usable.saturating_sub(fixed + apart + caches)
    });
    let buffered = asked.max_buffered_bytes.unwrap_or_else(|| match plannable {
        Some(p) => (p / 4).clamp(
            crate::limits::MAX_BODY_BYTES as u64,
            MAX_BUFFERED_BYTES as u64,
        ) as usize,
        None => MAX_BUFFERED_BYTES,
    });
    let connections = asked.max_connections.unwrap_or_else(|| {
        let by_memory = plannable.map_or(MAX_CONNECTIONS as u64, |p| {
            p.saturating_sub(buffered as u64) / per_connection
        });
        by_memory.min(by_files).clamp(16, MAX_CONNECTIONS as u64) as usize
    });
    let max_concurrent_requests = asked
        .max_concurrent_requests
        .unwrap_or(connections.saturating_mul(streams as usize));
    // Under a limit, one largest review is planned for; without one, as
    // many as there are cores to run them.
    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
    Limits {
        max_connections: connections,
        max_buffered_bytes: buffered,
        max_concurrent_requests,
        large_reviews: if limit.is_some() { 1 } else { parallelism },
        request_timeout: asked.request_timeout,
        body_pace: Pace {
            timeout: asked.body_timeout,
            min_rate: asked.min_body_rate,
        },
    }
}

/// The memory limit of this process's cgroup, if it has one.
pub(crate) fn memory_limit() -> Option<MemoryLimit> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |file: &Path| std::fs::read_to_string(file).ok();
    lowest_limit(&limit_dirs(&mounts, &cgroups), read)
}

/// Where a cgroup hierarchy holding the memory controller is mounted, and
/// the process's directory in it, with the file naming the limit there.
#[derive(Debug, PartialEq, Eq)]
struct LimitDirs {
    mount: PathBuf,
    dir: PathBuf,
    file: &'static str,
}

/// From `/proc/self/mountinfo` and `/proc/self/cgroup`: v1's memory
/// hierarchy first (when mounted, the limit is there), then v2's.
fn limit_dirs(mountinfo: &str, cgroup: &str) -> Vec<LimitDirs> {
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(root), Some(mount), Some(kind), Some(options)) = (
            fields.get(3),
            fields.get(4),
            fields.get(dash + 1),
            fields.get(dash + 3),
        ) else {
            continue;
        };
        let (controller, file) = match *kind {
            "cgroup" if options.split(',').any(|o| o == "memory") => {
                ("memory", "memory.limit_in_bytes")
            }
            "cgroup2" => ("", "memory.max"),
            _ => continue,
        };
        let own = cgroup.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = match controller {
                "" => controllers.is_empty(),
                c => controllers.split(',').any(|x| x == c),
            };
            matches.then_some(path)
        });
        let Some(own) = own else { continue };
        // A mount of a subtree (a container without its own cgroup
        // namespace) shows the process's path under the mount's root.
        let relative = Path::new(own)
            .strip_prefix(root)
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let entry = LimitDirs {
            mount: PathBuf::from(mount),
            dir: Path::new(mount).join(relative),
            file,
        };
        if controller == "memory" {
            found.insert(0, entry);
        } else {
            found.push(entry);
        }
    }
    found
}

/// The lowest limit from the process's directory up to the mount, in the
/// first hierarchy that has one.
fn lowest_limit(
    hierarchies: &[LimitDirs],
    read: impl Fn(&Path) -> Option<String>,
) -> Option<MemoryLimit> {
    for h in hierarchies {
        let mut lowest: Option<MemoryLimit> = None;
        let mut dir = Some(h.dir.as_path());
        while let Some(d) = dir.filter(|d| d.starts_with(&h.mount)) {
            let file = d.join(h.file);
            let bytes = read(&file).and_then(|text| parse_limit(&text));
            if let Some(bytes) = bytes.filter(|b| lowest.as_ref().is_none_or(|l| *b < l.bytes)) {
                lowest = Some(MemoryLimit { bytes, file });
            }
            dir = d.parent();
        }
        if lowest.is_some() {
            return lowest;
        }
    }
    None
}

/// A limit file's text: v2's `max` and v1's page-rounded 2^63 mean none.
fn parse_limit(text: &str) -> Option<u64> {
    let value = text.trim().parse::<u64>().ok()?;
    (value < 1 << 60).then_some(value)
}

#[cfg(test)]
mod tests;
