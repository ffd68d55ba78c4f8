#!/usr/bin/env python3
"""Measures what the server's memory bounds rest on (src/server/sizing.rs,
docs/operations.md "Memory"): the server at rest, one idle HTTP/2 and
HTTP/1 connection, one HTTP/2 stream whose answer waits, and the largest
review. `serve` runs in a memory cgroup without a limit, so each figure is
the cgroup's charge (what an OOM kill counts) and the resident set, both
as deltas over many of the same thing.

    python3 loadtest/memory_costs.py

Needs root and a cgroup memory controller, like loadtest/redteam.py, and the
release binary and attack client it names.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redteam  # noqa: E402
from redteam import MIB, ROOT, Cgroup, Served, log, rss  # noqa: E402

SMALL = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")


def charge(server):
    return server.cgroup.usage(), rss(server.proc.pid)


def settle():
    time.sleep(3)


def per_item(name, server, before, count, unit=1024):
    usage, resident = charge(server)
    per_usage = (usage - before[0]) / count / unit
    per_rss = (resident - before[1]) / count / unit
    label = "KiB" if unit == 1024 else "MiB"
    log(f"{name}: {per_usage:.1f} {label} charged, {per_rss:.1f} {label} resident (over {count})")
    return per_usage, per_rss


def connections(tmp, cgroup, mode, count):
    server = Served(tmp, cgroup, flags=["--max-connections", "20000", "--write-timeout", "300s",
                                        "--idle-timeout", "300s"])
    server.review(SMALL)
    settle()
    before = charge(server)
    args = {"h2": ["idle-h2", "--connections", str(count)],
            "streams": ["h2-unread", "--connections", str(count // 16), "--streams", "16"]}[mode]
    attack = server.attack(SMALL, *args, "--hold", "40s")
    time.sleep(30)
    result = per_item({"h2": "idle HTTP/2 connection (after one review)",
                       "streams": "HTTP/2 stream whose answer waits (16 per connection)"}[mode],
                      server, before, count)
    attack.kill()
    server.stop(10)
    return result


def largest_review(tmp, cgroup, budget):
    """The largest reviews under the byte budget `budget`: a 7 MiB body whose
    patch is over the answer bound (denied before the patch is written),
    and one whose answer just fits."""
    cases = [
        ("7 MiB of annotations, refused before injection",
         redteam.oci_review(tmp, int(6.9 * MIB), "annotations.json")),
        ("7 MiB body (a 6.9 MB readiness probe no injector copies), patched",
         redteam.probe_review(tmp, int(6.9 * MIB), "probe.json")),
        ("the largest patch within the annotation limit (a 250 KiB storage URI)",
         redteam.oci_review(tmp, 250 * 1024, "oci-250k.json")),
    ]
    for name, body in cases:
        # A server of its own: what an earlier case left to the allocator
        # would hide this one's peak.
        server = Served(tmp, cgroup, flags=["--max-buffered-bytes", str(budget)])
        server.review(SMALL)
        settle()
        base = charge(server)
        peak = redteam.Peak(server.proc.pid, cgroup)
        ok, seen = server.review(body)
        time.sleep(0.5)
        top_rss, top_usage = peak.stop()
        log(f"largest review ({name}, --max-buffered-bytes {budget}): +{(top_usage - base[0]) / MIB:.1f} "
            f"MiB charged, +{(top_rss - base[1]) / MIB:.1f} MiB resident at its peak over "
            f"{base[0] / MIB:.1f} / {base[1] / MIB:.1f} MiB at rest "
            f"(HTTP {seen.get('status')}, allowed {seen.get('allowed')})")
        server.stop(10)


def main():
    if os.geteuid() != 0:
        log("SKIPPED: not root")
        return 0
    cgroup = Cgroup(1 << 40)
    if cgroup.path is None:
        log(f"SKIPPED: {cgroup.why}")
        return 0
    import tempfile
    tmp = tempfile.mkdtemp(prefix="memory-costs-")
    try:
        largest_review(tmp, cgroup, 8 * MIB)
        connections(tmp, cgroup, "h2", 2000)
        connections(tmp, cgroup, "streams", 2000)
    finally:
        cgroup.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
