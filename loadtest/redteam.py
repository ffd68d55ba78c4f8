#!/usr/bin/env python3
"""The red-team suite: `serve` inside a real memory cgroup at the limit the
chart and the kustomize base ship (128 MiB), attacked the ways issues 38
and 46 list, each attack followed by real reviews and /healthz. The server
must stay alive (the cgroup's OOM-kill count 0), answer a real review
within the request timeout during and after each attack, and come back
below a stated resident size once the attack ends.

The attacks on the server's slots (promises, busy, trickle, large,
rotation-ahead) run with two API-server-like probes through them
(`attack_client probes`): a review every second on a new TLS connection
(HTTP/2, the 1.1 KB minimal-oci review, retried after Retry-After or 1 s
while its 5 s deadline allows) and a review every second on one persistent
HTTP/2 connection. Each probe must get 200 within 5 s for at least 99% of
its reviews, and the server must never close the persistent connection.
A kubelet-like readiness probe runs beside them (a new connection every
second, `GET /readyz`, 1 s timeout), which must never fail 3 times in a
row (kubelet's failureThreshold). The attacks of issue 58 (the admin port,
connection churn, busy clients) come from other loopback addresses than
the probes (127.0.0.2 to 127.0.0.5), as other pods would; one runs under
`ulimit -n 1024`.

    python3 loadtest/redteam.py                  # every attack
    python3 loadtest/redteam.py h2-unread idle   # some of them
    python3 loadtest/redteam.py --list

Needs root and a cgroup memory controller (v1 or v2); without them it says
so and exits 0 (skipped, never silently). Needs the release binary and the
attack client: `cargo build --release --locked --bin kserve-injector
--example attack_client`.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
# KSERVE_INJECTOR_BIN: another build to attack (an older one, to show what an attack did to it).
BIN = os.environ.get("KSERVE_INJECTOR_BIN", os.path.join(TARGET, "release", "kserve-injector"))
CLIENT = os.path.join(TARGET, "release", "examples", "attack_client")
MIB = 1 << 20
# resources.limits.memory in charts/kserve-injector/values.yaml and
# manifests/base/deployment.yaml (tests/manifests checks they agree).
LIMIT = 128 * MIB
# After an attack ends and its connections close, the server's resident
# set must come back under this (an idle server is about 12 MiB).
SETTLED_RSS = 48 * MIB
REQUEST_TIMEOUT = 5.0
# The webhook's timeoutSeconds as the chart and the kustomize base ship it:
# the probes' deadline.
TIMEOUT_SECONDS = 5.0
# Of each probe's reviews, at least this share must be answered 200 in time.
PROBE_QUORUM = 0.99
# How long each attack on the server's slots lasts; the probes run through
# all of it but its first and last second.
HOLD = 15
# The cgroup's peak charge under 200 clients sending valid 1-3 MB reviews.
LARGE_PEAK = 100 * MIB
# Where the attacks of issue 58 connect from: other clients than the probes'
# 127.0.0.1.
ATTACKERS = "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5"
# kubelet's failureThreshold: this many failed readiness probes in a row
# take the pod out of its Service.
READYZ_FAILURES = 3
sys.path.insert(0, os.path.join(ROOT, "loadtest"))


def log(message):
    print(f"redteam: {message}", flush=True)


class Cgroup:
    """A child memory cgroup of this process's own, v2 or v1."""

    def __init__(self, limit):
        self.path = self.version = None
        unified = "/sys/fs/cgroup"
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                own[controllers] = path
        candidates = []
        if os.path.exists(os.path.join(unified, "cgroup.controllers")):
            candidates.append(("v2", unified + own.get("", "/")))
        for mount in ("/sys/fs/cgroup/unified",):
            if os.path.exists(os.path.join(mount, "cgroup.controllers")):
                with open(os.path.join(mount, "cgroup.controllers")) as f:
                    if "memory" in f.read().split():
                        candidates.append(("v2", mount + own.get("", "/")))
        for controllers, path in own.items():
            if "memory" in controllers.split(","):
                candidates.append(("v1", "/sys/fs/cgroup/memory" + path))
        self.why = "no memory cgroup controller is mounted"
        for version, parent in candidates:
            child = os.path.join(parent, f"kserve-injector-redteam-{os.getpid()}")
            try:
                if version == "v2":
                    with open(os.path.join(parent, "cgroup.controllers")) as f:
                        if "memory" not in f.read().split():
                            self.why = f"{parent}: the memory controller is not enabled"
                            continue
                os.mkdir(child)
                limit_file = "memory.max" if version == "v2" else "memory.limit_in_bytes"
                with open(os.path.join(child, limit_file), "w") as f:
                    f.write(str(limit))
                if version == "v2":
                    with open(os.path.join(child, "memory.swap.max"), "w") as f:
                        f.write("0")
            except OSError as e:
                self.why = f"cannot create a memory cgroup under {parent}: {e}"
                try:
                    os.rmdir(child)
                except OSError:
                    pass
                continue
            self.path, self.version = child, version
            return

    def file(self, name):
        return os.path.join(self.path, name)

    def oom_kills(self):
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        with open(self.file(name)) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def usage(self):
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        with open(self.file(name)) as f:
            return int(f.read())

    def enter_command(self):
        """A shell prefix that moves the command into this cgroup first."""
        return ["sh", "-c", f'echo $$ > {self.file("cgroup.procs")} && exec "$@"', "sh"]

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


class Peak(threading.Thread):
    """Samples the server's resident set and the cgroup's usage every 20 ms."""

    def __init__(self, pid, cgroup):
        super().__init__(daemon=True)
        self.pid, self.cgroup = pid, cgroup
        self.rss = self.usage = 0
        self.done = threading.Event()
        self.start()

    def run(self):
        while not self.done.is_set():
            self.rss = max(self.rss, rss(self.pid))
            try:
                self.usage = max(self.usage, self.cgroup.usage())
            except OSError:
                pass
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.join()
        return self.rss, self.usage


class Served:
    def __init__(self, tmp, cgroup, flags=(), cert_dir=None, ca=None, config=None, nofile=None):
        self.tmp, self.cgroup = tmp, cgroup
        self.port, self.admin = free_port(), free_port()
        self.cert_dir = cert_dir
        args = [BIN, "serve", "--addr", f"127.0.0.1:{self.port}",
                "--admin-addr", f"127.0.0.1:{self.admin}", "--cluster-lookups", "off",
                "--shutdown-delay", "0s", "--drain-timeout", "5s", *flags]
        if cert_dir:
            args += ["--cert-dir", cert_dir, "--cert-poll-interval", "1s"]
            self.ca, self.server_name = ca, "kserve-injector.kserve.svc"
        else:
            self.ca = os.path.join(tmp, "self-signed-ca.crt")
            args += ["--self-signed", "--self-signed-ca-file", self.ca]
            self.server_name = "localhost"
        if config:
            args += ["--config", config, "--config-poll-interval", "500ms"]

        self.log_path = os.path.join(tmp, f"serve-{self.port}.log")
        self.log = open(self.log_path, "w")
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
                 ) if nofile else raise_nofile
        self.proc = subprocess.Popen(cgroup.enter_command() + args, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=limit)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"redteam: serve exited at start:\n{self.logs()}")
            if self.admin_get("/healthz")[0] == 200:
                return
            time.sleep(0.05)
        raise SystemExit(f"redteam: serve did not come up:\n{self.logs()}")

    def logs(self):
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def admin_get(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def metric(self, series):
        _, text = self.admin_get("/metrics")
        total = None
        for line in text.splitlines():
            if line.startswith(series + " ") or line.startswith(series + "{"):
                total = (total or 0) + float(line.rsplit(" ", 1)[1])
        return total

    def review(self, body):
        out = subprocess.run([CLIENT, "--addr", f"127.0.0.1:{self.port}", "--ca", self.ca,
                              "--server-name", self.server_name, "--body", body, "review"],
                             capture_output=True, text=True, timeout=60)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "{}"
        return out.returncode == 0, json.loads(line)

    def attack(self, body, *args, sources=None):
        source = ["--source", sources] if sources else []
        return subprocess.Popen([CLIENT, "--addr", f"127.0.0.1:{self.port}", "--ca", self.ca,
                                 "--server-name", self.server_name, "--body", body,
                                 "--admin", f"127.0.0.1:{self.admin}", *source, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=raise_nofile)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, within):
        """SIGTERM; True when the process ended within `within` seconds."""
        if not self.alive():
            return False
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=within)
            ok = True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            ok = False
        self.log.close()
        return ok


def raise_nofile():
    """Open files up to the hard limit, for thousands of connections."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Verdict:
    def __init__(self):
        self.failures, self.rows = [], []

    def check(self, condition, message):
        if not condition:
            self.failures.append(message)
            log(f"FAIL: {message}")
        return condition


def oci_review(tmp, uri_bytes, name):
    """The minimal OCI review with a storage URI of about `uri_bytes`; its
    answer is about four times its size (the image name is written into
    the modelcar and its init container, then base64-encoded)."""
    with open(os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")) as f:
        review = json.load(f)
    annotations = review["request"]["object"]["metadata"]["annotations"]
    annotations["internal.serving.kserve.io/storage-initializer-sourceuri"] = (
        "oci://registry.example.com/" + "m" * uri_bytes)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(review, f, separators=(",", ":"))
    return path


def probe_review(tmp, probe_bytes, name):
    """The typical review (every injector but the modelcar acts) with a
    readiness probe of about `probe_bytes` on the model server: a body of
    that size that is decoded, reviewed and patched."""
    with open(os.path.join(ROOT, "benches", "inputs", "typical.json")) as f:
        review = json.load(f)
    server = review["request"]["object"]["spec"]["containers"][0]
    server["readinessProbe"] = {"exec": {"command": ["sh", "-c", "p" * probe_bytes]}}
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(review, f, separators=(",", ":"))
    return path


def during_and_after(server, verdict, name, small, attack, settle=30):
    """Runs `attack` (a started client process or a callable), a real review
    every second meanwhile, then checks the server once it has ended."""
    peak = Peak(server.proc.pid, server.cgroup)
    oom_before = server.cgroup.oom_kills()
    slowest, failed_reviews, reviews = 0.0, [], 0
    while attack.poll() is None:
        ok, seen = server.review(small)
        reviews += 1
        slowest = max(slowest, seen.get("seconds", 99))
        if not ok:
            failed_reviews.append(seen)
        if not server.alive():
            break
        time.sleep(1)
    out, err = attack.communicate()
    report = out.strip().splitlines()[-1] if out.strip() else err.strip()[-500:]
    alive = server.alive()
    ok, seen = server.review(small) if alive else (False, {})
    health = server.admin_get("/healthz")[0]
    deadline = time.monotonic() + settle
    settled = rss(server.proc.pid)
    while alive and settled > SETTLED_RSS and time.monotonic() < deadline:
        time.sleep(0.5)
        settled = rss(server.proc.pid)
    peak_rss, peak_usage = peak.stop()
    oom = server.cgroup.oom_kills() - oom_before
    log(f"{name}: client {report}")
    log(f"{name}: peak RSS {peak_rss / MIB:.1f} MiB, cgroup peak {peak_usage / MIB:.1f} MiB "
        f"(limit {LIMIT / MIB:.0f} MiB), OOM kills {oom}, reviews meanwhile {reviews} "
        f"(failed {len(failed_reviews)}, slowest {slowest:.3f} s), after: review "
        f"{seen.get('status')} in {seen.get('seconds', 0):.3f} s, /healthz {health}, "
        f"RSS settled to {settled / MIB:.1f} MiB")
    verdict.check(alive, f"{name}: the server died:\n{server.logs()}")
    verdict.check(oom == 0, f"{name}: {oom} OOM kills in the cgroup")
    verdict.check(not failed_reviews, f"{name}: real reviews failed meanwhile: {failed_reviews[:3]}")
    verdict.check(slowest <= REQUEST_TIMEOUT, f"{name}: a real review took {slowest:.2f} s")
    verdict.check(ok, f"{name}: the review after the attack failed: {seen}")
    verdict.check(health == 200, f"{name}: /healthz answered {health}")
    verdict.check(settled <= SETTLED_RSS,
                  f"{name}: RSS {settled / MIB:.1f} MiB after the attack, over {SETTLED_RSS / MIB:.0f} MiB")
    return {"peak_rss_mib": round(peak_rss / MIB, 1), "cgroup_peak_mib": round(peak_usage / MIB, 1),
            "settled_rss_mib": round(settled / MIB, 1), "oom_kills": oom}


def attack_h2_unread(tmp, cgroup, verdict):
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    big = oci_review(tmp, 1 << 20, "oci-1m.json")
    huge = oci_review(tmp, int(6.8 * MIB), "oci-6.8m.json")
    results = {}
    for name, body, args in [
        ("h2-unread 240 streams", big, ["--connections", "1", "--streams", "240"]),
        ("h2-unread 3x240 streams", big, ["--connections", "3", "--streams", "240"]),
        ("h2-unread 10 x 6.8 MB", huge, ["--connections", "1", "--streams", "10"]),
    ]:
        server = Served(tmp, cgroup)
        attack = server.attack(body, "h2-unread", *args, "--hold", "20s")
        results[name] = during_and_after(server, verdict, name, small, attack)
        server.stop(10)
    return results


def attack_h1_unread(tmp, cgroup, verdict):
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    big = oci_review(tmp, 1 << 20, "oci-1m.json")
    server = Served(tmp, cgroup)
    attack = server.attack(big, "h1-unread", "--connections", "40", "--hold", "20s")
    result = during_and_after(server, verdict, "h1-unread 40 connections", small, attack)
    server.stop(10)
    return {"h1-unread 40 connections": result}


def attack_idle(tmp, cgroup, verdict):
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    server = Served(tmp, cgroup)
    attack = server.attack(small, "idle-h2", "--connections", "4300", "--hold", "25s")
    result = during_and_after(server, verdict, "idle-h2 4300 connections", small, attack)
    server.stop(10)
    return {"idle-h2 4300 connections": result}


def probes(server, duration, small=None):
    """The two API-server-like probes, started now for `duration` seconds."""
    small = small or os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    return subprocess.Popen([CLIENT, "--addr", f"127.0.0.1:{server.port}", "--ca", server.ca,
                             "--server-name", server.server_name, "--body", small,
                             "--admin", f"127.0.0.1:{server.admin}", "probes",
                             "--duration", f"{duration}s", "--deadline", f"{TIMEOUT_SECONDS:g}s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=raise_nofile)


def probe_figures(proc, verdict, name):
    """The probes' report, checked: each answered 200 within the deadline
    for PROBE_QUORUM of its reviews, the persistent connection never closed."""
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    lines = out.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        verdict.check(False, f"{name}: the probes reported nothing: {err.strip()[-500:]}")
        return {}
    figures = {}
    for probe in ("new_connection", "persistent"):
        seen = report[probe]
        reviews, answered = seen["reviews"], seen["answered"]
        share = answered / reviews if reviews else 0.0
        verdict.check(reviews > 0, f"{name}: the {probe} probe sent no review")
        verdict.check(share >= PROBE_QUORUM,
                      f"{name}: the {probe} probe got 200 within {TIMEOUT_SECONDS:g} s for "
                      f"{answered} of {reviews} reviews ({share:.0%}, needs {PROBE_QUORUM:.0%}); "
                      f"failures: {seen['failures']}")
        figures[probe] = {key: (round(seen[key], 3) if isinstance(seen[key], float) else seen[key])
                          for key in ("reviews", "answered", "p50", "p99", "max")}
    closed = report["persistent"]["goaway"] + report["persistent"]["closed"]
    verdict.check(closed == 0, f"{name}: the server closed the persistent probe's connection "
                               f"{closed} times (GOAWAY {report['persistent']['goaway']}): "
                               f"a connection that keeps completing reviews was evicted")
    figures["persistent"]["closed_by_server"] = closed
    readyz = report.get("readyz")
    if readyz is not None:
        verdict.check(readyz["failed_in_a_row"] < READYZ_FAILURES,
                      f"{name}: /readyz failed {readyz['failed_in_a_row']} times in a row "
                      f"({readyz['answered']} of {readyz['tries']} answered within 1 s): "
                      f"{readyz['failures']}")
        figures["readyz"] = {key: (round(readyz[key], 3) if isinstance(readyz[key], float)
                                   else readyz[key])
                             for key in ("tries", "answered", "failed_in_a_row", "longest_gap",
                                         "p50", "max")}
    return figures


def under_probes(server, verdict, name, start_attack, hold=HOLD, peak_limit=None):
    """Runs the attack `start_attack` starts (a client process holding for
    `hold` seconds) with the two probes through it, the persistent one
    established a second before the attack, as the API server's are; then
    checks the server, the probes and the cgroup."""
    peak = Peak(server.proc.pid, server.cgroup)
    oom_before = server.cgroup.oom_kills()
    running = probes(server, hold)
    time.sleep(1)
    attack = start_attack()
    figures = probe_figures(running, verdict, name)
    out, err = attack.communicate()
    report = out.strip().splitlines()[-1] if out.strip() else err.strip()[-500:]
    alive = server.alive()
    peak_rss, peak_usage = peak.stop()
    oom = server.cgroup.oom_kills() - oom_before
    log(f"{name}: client {report}")
    for probe in ("new_connection", "persistent"):
        if probe in figures:
            f = figures[probe]
            log(f"{name}: {probe} probe: {f['answered']} of {f['reviews']} answered 200 within "
                f"{TIMEOUT_SECONDS:g} s, p50 {f['p50']} s, p99 {f['p99']} s, max {f['max']} s")
    if "readyz" in figures:
        f = figures["readyz"]
        log(f"{name}: /readyz probe: {f['answered']} of {f['tries']} answered within 1 s, "
            f"p50 {f['p50']} s, max {f['max']} s, longest gap {f['longest_gap']} s, "
            f"at most {f['failed_in_a_row']} failed in a row")
    log(f"{name}: peak RSS {peak_rss / MIB:.1f} MiB, cgroup peak {peak_usage / MIB:.1f} MiB "
        f"(limit {LIMIT / MIB:.0f} MiB), OOM kills {oom}")
    verdict.check(alive, f"{name}: the server died:\n{server.logs()}")
    verdict.check(oom == 0, f"{name}: {oom} OOM kills in the cgroup")
    if peak_limit is not None:
        verdict.check(peak_usage < peak_limit,
                      f"{name}: the cgroup peaked at {peak_usage / MIB:.1f} MiB, over "
                      f"{peak_limit / MIB:.0f} MiB of the {LIMIT / MIB:.0f} MiB limit")
    figures.update({"peak_rss_mib": round(peak_rss / MIB, 1),
                    "cgroup_peak_mib": round(peak_usage / MIB, 1), "oom_kills": oom})
    return figures


def attack_promises(tmp, cgroup, verdict):
    """Issue 46, 1 and 2: streams that declare a body and send none of it,
    re-opened as soon as they are answered. 4 streams declaring a quarter
    of the 11 MiB byte budget each on one connection; 4 connections of 128
    streams declaring 100 bytes each (as many as the server lets them open)."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    results = {}
    for name, args in [
        ("promise: 1 connection x 4 streams declaring 2.75 MiB",
         ["--connections", "1", "--streams", "4", "--declared", "2883584"]),
        ("promise: 4 connections x 128 streams declaring 100 B",
         ["--connections", "4", "--streams", "128", "--declared", "100"]),
    ]:
        server = Served(tmp, cgroup)
        attack = lambda: server.attack(small, "promise", *args, "--hold", f"{HOLD}s")
        results[name] = under_probes(server, verdict, name, attack)
        server.stop(10)
    return results


def attack_busy(tmp, cgroup, verdict):
    """Issue 46, 3: connections that each open a new stream every 2 s whose
    body never comes, so they always have a request in flight; as many as
    the connection cap (96 at 128 MiB), and more (120), each reconnecting
    when closed."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    results = {}
    for connections in (96, 120):
        name = f"busy: {connections} connections, a stalled stream every 2 s"
        server = Served(tmp, cgroup)
        attack = lambda: server.attack(small, "busy", "--connections", str(connections),
                               "--every", "2s", "--hold", f"{HOLD}s")
        results[name] = under_probes(server, verdict, name, attack)
        server.stop(10)
    return results


def attack_trickle(tmp, cgroup, verdict):
    """Issue 46, 4: a review's body trickled one byte every 3 s on 96
    connections, each reconnecting when closed."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    name = "trickle: 96 connections, a byte every 3 s"
    server = Served(tmp, cgroup)
    attack = lambda: server.attack(small, "trickle", "--connections", "96", "--every", "3s",
                           "--hold", f"{HOLD}s")
    result = under_probes(server, verdict, name, attack)
    server.stop(10)
    return {name: result}


def attack_large(tmp, cgroup, verdict):
    """Issue 46, 7: legitimate overload: 200 clients sending valid reviews
    of 1, 2 and 3 MB (decoded, reviewed and patched) one after another;
    the cgroup must stay under LARGE_PEAK."""
    bodies = [probe_review(tmp, size * 1000 * 1000, f"probe-{size}mb.json") for size in (1, 2, 3)]
    name = "large: 200 clients sending valid 1-3 MB reviews"
    server = Served(tmp, cgroup)
    attack = lambda: server.attack(bodies[0], "large", "--clients", "200", "--also", bodies[1],
                           "--also", bodies[2], "--hold", f"{HOLD}s")
    result = under_probes(server, verdict, name, attack, peak_limit=LARGE_PEAK)
    server.stop(10)
    return {name: result}


def attack_rotation_ahead(tmp, cgroup, verdict, ahead=15, poll=1.0):
    """Issue 46, 5: a rotation whose notBefore is 15 s ahead of the clock
    (an issuer's clock ahead, files landing early), with the probes through
    it: the old pair serves until then, and the new one is served within
    one --cert-poll-interval of its notBefore."""
    hostile = os.path.join(ROOT, "loadtest", "hostile_certs.py")
    made, cert_dir = os.path.join(tmp, "ahead-certs"), os.path.join(tmp, "ahead-cert-dir")
    os.makedirs(cert_dir, exist_ok=True)

    def run(*args):
        subprocess.run([sys.executable, hostile, *args], check=True, capture_output=True, text=True)

    run("make", made, "--binary", BIN)
    run("place", made, "good", cert_dir)
    name = f"rotation-ahead: notBefore {ahead} s ahead"
    server = Served(tmp, cgroup, cert_dir=cert_dir, ca=os.path.join(made, "good", "ca.crt"))
    peak = Peak(server.proc.pid, cgroup)
    oom_before = cgroup.oom_kills()
    running = probes(server, ahead + 10)
    first = served_cert(server)
    made_ahead = subprocess.run([CLIENT, "cert-ahead", "--ca-dir", os.path.join(made, "good"),
                                 "--out", os.path.join(made, "ahead"), "--ahead", f"{ahead}s"],
                                check=True, capture_output=True, text=True)
    not_before = json.loads(made_ahead.stdout.strip().splitlines()[-1])["not_before_unix"]
    run("place", made, "ahead", cert_dir)
    with open(os.path.join(made, "ahead", "tls.crt")) as f:
        new = ssl.PEM_cert_to_DER_cert(f.read())
    early = []
    while time.time() < not_before - 1:
        if served_cert(server) != first:
            early.append(round(time.time() - not_before, 1))
        time.sleep(1)
    verdict.check(not early, f"{name}: the old pair was not served before the new one's notBefore "
                             f"(at {early} s)")
    seen_at = None
    while time.time() < not_before + 10:
        if served_cert(server) == new:
            seen_at = time.time()
            break
        time.sleep(0.1)
    lag = None if seen_at is None else round(seen_at - not_before, 2)
    verdict.check(lag is not None and lag <= poll + 0.5,
                  f"{name}: the new pair was not served within one --cert-poll-interval ({poll:g} s) "
                  f"of its notBefore: " + (f"{lag} s after it" if lag is not None else
                  "still not served 10 s after it (a pair refused as not yet valid must be "
                  "re-examined until it loads; issue 46, item 4)"))
    figures = probe_figures(running, verdict, name)
    alive = server.alive()
    server.stop(10)
    peak_rss, peak_usage = peak.stop()
    oom = cgroup.oom_kills() - oom_before
    verdict.check(alive, f"{name}: the server died")
    verdict.check(oom == 0, f"{name}: {oom} OOM kills")
    log(f"{name}: new pair served {lag} s after its notBefore (poll {poll:g} s); probes {figures}")
    figures.update({"served_after_not_before_s": lag, "peak_rss_mib": round(peak_rss / MIB, 1),
                    "cgroup_peak_mib": round(peak_usage / MIB, 1), "oom_kills": oom})
    return {name: figures}


def served_cert(server):
    """The DER of the certificate a new handshake is served, or why the
    handshake failed."""
    import socket
    context = ssl.create_default_context(cafile=server.ca)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname=server.server_name) as tls:
                return tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as e:
        return f"handshake failed: {e}"


def wait_for(what, probe, limit=15):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(what)


def attack_certs(tmp, cgroup, verdict):
    """Every hostile certificate case rotated into a serving cert dir: each
    refused, counted, the previous pair serving on and /readyz ok; then a
    valid rotation loaded; then SIGTERM with a FIFO at the certificate path
    ends the process within the drain bounds."""
    hostile = os.path.join(ROOT, "loadtest", "hostile_certs.py")
    made, cert_dir = os.path.join(tmp, "certs"), os.path.join(tmp, "cert-dir")
    os.makedirs(cert_dir, exist_ok=True)
    def run(*args):
        subprocess.run([sys.executable, hostile, *args], check=True, capture_output=True, text=True)

    run("make", made, "--binary", BIN)
    run("place", made, "good", cert_dir)
    with open(os.path.join(made, "cases.tsv")) as f:
        cases = [line.split("\t")[0] for line in f if line.strip()]
    server = Served(tmp, cgroup, cert_dir=cert_dir, ca=os.path.join(made, "good", "ca.crt"))
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    peak = Peak(server.proc.pid, cgroup)
    errors = "kserve_injector_certificate_reload_errors_total"
    first = served_cert(server)
    for case in cases:
        before = server.metric(errors) or 0
        run("place", made, case, cert_dir)
        try:
            wait_for(f"{case}: a reload error", lambda: (server.metric(errors) or 0) > before)
        except TimeoutError:
            verdict.check(False, f"certs {case}: no reload error counted")
        ok, seen = server.review(small)
        verdict.check(ok, f"certs {case}: a review after it failed: {seen}")
        now = served_cert(server)
        verdict.check(now == first, f"certs {case}: the served certificate changed"
                      + (f" ({now})" if isinstance(now, str) else ""))
        verdict.check(server.admin_get("/readyz")[0] == 200, f"certs {case}: /readyz is not ok")
    reloads = "kserve_injector_certificate_reloads_total"
    before = server.metric(reloads) or 0
    run("place", made, "rotation", cert_dir)
    try:
        wait_for("the rotation to load", lambda: (server.metric(reloads) or 0) > before)
    except TimeoutError:
        verdict.check(False, "certs: the valid rotation after the hostile cases was not loaded")
    with open(os.path.join(made, "rotation", "tls.crt")) as f:
        rotated = ssl.PEM_cert_to_DER_cert(f.read())
    verdict.check(served_cert(server) == rotated, "certs: the rotation is not what is served")
    ok, seen = server.review(small)
    verdict.check(ok, f"certs: a review after the rotation failed: {seen}")
    run("place", made, "fifo", cert_dir)
    time.sleep(2)
    started = time.monotonic()
    # --shutdown-delay 0s and --drain-timeout 5s, plus a second of slack.
    ended = server.stop(6)
    verdict.check(ended, "certs: SIGTERM did not end the process within 6 s with a FIFO at tls.crt")
    peak_rss, peak_usage = peak.stop()
    oom = cgroup.oom_kills()
    verdict.check(oom == 0, f"certs: {oom} OOM kills")
    log(f"certs: {len(cases)} hostile cases rotated in ({', '.join(cases)}), then a valid "
        f"rotation; SIGTERM ended the process in {time.monotonic() - started:.2f} s; peak RSS "
        f"{peak_rss / MIB:.1f} MiB, cgroup peak {peak_usage / MIB:.1f} MiB")
    return {"certs": {"peak_rss_mib": round(peak_rss / MIB, 1),
                      "cgroup_peak_mib": round(peak_usage / MIB, 1), "oom_kills": oom}}


def attack_config(tmp, cgroup, verdict):
    """Nested-anchor ConfigMaps written over a served --config, reloaded:
    one that expands to 58 MiB from 101 KB (once an OOM kill under 128 MiB)
    and one of 3.85 MB; each refused, counted, the last good config in use,
    and then a valid one loaded."""
    hostile = os.path.join(ROOT, "loadtest", "hostile_yaml.py")
    shipped = os.path.join(ROOT, "core", "src", "config", "shipped", "head.yaml")
    config = os.path.join(tmp, "inferenceservice-config.yaml")
    shutil.copy(shipped, config)
    server = Served(tmp, cgroup, config=config)
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    peak = Peak(server.proc.pid, cgroup)
    errors, reloads = "kserve_injector_config_reload_errors_total", "kserve_injector_config_reloads_total"
    for name, args in [("101 KB expanding to 58 MiB", ["--size", "101000"]),
                       ("3.85 MB", ["--size", "3850000", "--scalar", "1000000", "--over"])]:
        text = subprocess.run([sys.executable, hostile, "--shape", "configmap", "--data", shipped, *args],
                              check=True, capture_output=True, text=True).stdout
        before = server.metric(errors) or 0
        with open(config + ".new", "w") as f:
            f.write(text)
        os.replace(config + ".new", config)
        try:
            wait_for(f"config {name}: a reload error", lambda: (server.metric(errors) or 0) > before)
        except TimeoutError:
            verdict.check(False, f"config {name}: no reload error counted")
        ok, seen = server.review(small)
        verdict.check(ok, f"config {name}: a review after it failed: {seen}")
    before = server.metric(reloads) or 0
    with open(shipped) as f, open(config + ".new", "w") as out:
        out.write(f.read().replace("kserve/storage-initializer:latest", "kserve/storage-initializer:redteam"))
    os.replace(config + ".new", config)
    try:
        wait_for("config: the valid config to load", lambda: (server.metric(reloads) or 0) > before)
    except TimeoutError:
        verdict.check(False, "config: a valid config after the hostile ones was not loaded")
    ok, seen = server.review(small)
    verdict.check(ok, f"config: a review after the valid config failed: {seen}")
    alive = server.alive()
    verdict.check(alive, f"config: the server died:\n{server.logs()}")
    server.stop(10)
    peak_rss, peak_usage = peak.stop()
    oom = cgroup.oom_kills()
    verdict.check(oom == 0, f"config: {oom} OOM kills")
    log(f"config: nested-anchor ConfigMaps reloaded, then a valid one; peak RSS "
        f"{peak_rss / MIB:.1f} MiB, cgroup peak {peak_usage / MIB:.1f} MiB")
    return {"config": {"peak_rss_mib": round(peak_rss / MIB, 1),
                       "cgroup_peak_mib": round(peak_usage / MIB, 1), "oom_kills": oom}}


def attack_admin(tmp, cgroup, verdict):
    """Issue 58, 1 and 2: the admin port, from other addresses than the
    probes: 377 connections each sending a request head that never ends
    (hyper's default buffers about 400 KiB of one), and 2,000 connections
    that send nothing, each opened again whenever it is closed."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    results = {}
    for name, args in [
        ("admin-heads: 377 endless request heads", ["admin-heads", "--connections", "377"]),
        ("admin-idle: 2,000 idle connections", ["admin-idle", "--connections", "2000"]),
    ]:
        server = Served(tmp, cgroup)
        attack = lambda: server.attack(small, *args, "--hold", f"{HOLD}s", sources=ATTACKERS)
        results[name] = under_probes(server, verdict, name, attack)
        server.stop(10)
    return results


def attack_nofile(tmp, cgroup, verdict):
    """Issue 58, 2: under `ulimit -n 1024` (a common container soft limit),
    1,100 idle admin connections from other addresses than the probes:
    more than every descriptor, were they kept."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    name = "nofile: ulimit -n 1024, 1,100 idle admin connections"
    server = Served(tmp, cgroup, nofile=1024)
    with open(f"/proc/{server.proc.pid}/limits") as f:
        limit = [line for line in f if line.startswith("Max open files")]
    log(f"{name}: {' '.join(''.join(limit).split())}")
    attack = lambda: server.attack(small, "admin-idle", "--connections", "1100", "--hold",
                                   f"{HOLD}s", sources=ATTACKERS)
    result = under_probes(server, verdict, name, attack)
    errors = server.metric("kserve_injector_accept_errors_total")
    log(f"{name}: accept errors {errors}")
    result["accept_errors"] = errors
    server.stop(10)
    return {name: result}


def attack_churn(tmp, cgroup, verdict):
    """Issue 58, 3: TCP connections from 4 addresses that never send a
    byte, opened as fast as the server takes them (64 at once)."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    name = "churn: silent TCP connections from 4 addresses, 64 at once"
    server = Served(tmp, cgroup)
    attack = lambda: server.attack(small, "churn", "--connections", "64", "--hold", f"{HOLD}s",
                                   sources=ATTACKERS)
    result = under_probes(server, verdict, name, attack)
    server.stop(10)
    return {name: result}


def attack_reviewing(tmp, cgroup, verdict):
    """Issue 58, 4: 64 connections from one address, each completing a
    small review 4 times a second (busier than the persistent probe, which
    reviews once a second), reconnecting whenever closed."""
    small = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")
    name = "reviewing: 64 busy connections from one address"
    server = Served(tmp, cgroup)
    attack = lambda: server.attack(small, "reviewing", "--connections", "64", "--every",
                                   "250ms", "--hold", f"{HOLD}s", sources="127.0.0.2")
    result = under_probes(server, verdict, name, attack)
    server.stop(10)
    return {name: result}


ATTACKS = {
    "h2-unread": attack_h2_unread,
    "h1-unread": attack_h1_unread,
    "idle": attack_idle,
    "certs": attack_certs,
    "config": attack_config,
    "promises": attack_promises,
    "busy": attack_busy,
    "trickle": attack_trickle,
    "large": attack_large,
    "rotation-ahead": attack_rotation_ahead,
    "admin": attack_admin,
    "nofile": attack_nofile,
    "churn": attack_churn,
    "reviewing": attack_reviewing,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", help="attacks to run (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.list:
        print("\n".join(ATTACKS))
        return 0
    chosen = args.attacks or list(ATTACKS)
    unknown = [a for a in chosen if a not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks {unknown}; known: {list(ATTACKS)}")
    if os.geteuid() != 0:
        log("SKIPPED: not root, so no memory cgroup can be made (CI runs as root)")
        return 0
    for path in (BIN, CLIENT):
        if not os.access(path, os.X_OK):
            log(f"{path} is missing: cargo build --release --locked --bin kserve-injector "
                "--example attack_client")
            return 2
    cgroup = Cgroup(LIMIT)
    if cgroup.path is None:
        log(f"SKIPPED: {cgroup.why}")
        return 0
    log(f"cgroup {cgroup.version} {cgroup.path}, limit {LIMIT // MIB} MiB")
    verdict, figures = Verdict(), {}
    tmp = tempfile.mkdtemp(prefix="redteam-")
    try:
        for name in chosen:
            started = time.monotonic()
            figures.update(ATTACKS[name](tmp, cgroup, verdict))
            log(f"{name}: {time.monotonic() - started:.0f} s")
    finally:
        cgroup.remove()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    for name, figure in figures.items():
        log(f"figure: {name}: {figure}")
    if verdict.failures:
        log(f"{len(verdict.failures)} checks failed")
        return 1
    log("every attack left the server alive and answering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
