#!/usr/bin/env python3
"""Paced HTTPS load for loadtest/soak.sh (stdlib only; loopback only).

Each worker keeps one keep-alive connection and replaces it with a new one
(a fresh TLS handshake, verified against the CA file) every --reconnect
requests, so certificate rotations on the server are actually exercised.
Every answer must be HTTP 200 carrying an AdmissionReview response for the
request's uid.

Counting, when the server is being stopped (the file --stop-marker exists):
- a connection refused (or reset during the handshake) after the marker
  appeared is "refused": the listener has closed, not a failed request;
- a request on a reused connection that the server closed (draining) before
  sending any response byte is retried once on a new connection, as Go's HTTP
  client (the API server's) does for a connection closed while idle; before
  the marker exists such a close is a failure.
Anything else that is not a correct answer is "failed". Before the marker
exists, refusals are failures too.

Prints one JSON line: sent, ok, failed, refused, retried, latency
percentiles (ms), distinct serving certificates seen, first failures.
"""
import argparse
import hashlib
import http.client
import json
import os
import socket
import ssl
import sys
import threading
import time


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.ok = 0
        self.failed = 0
        self.refused = 0
        self.retried = 0
        self.latencies = []
        self.certs = set()
        self.failures = []

    def fail(self, why):
        with self.lock:
            self.failed += 1
            if len(self.failures) < 10:
                self.failures.append(why)


class Worker(threading.Thread):
    def __init__(self, args, ctx, body, uid, stats, index, stop):
        super().__init__(daemon=True)
        self.args, self.ctx, self.body, self.uid = args, ctx, body, uid
        self.stats, self.index, self.stop = stats, index, stop
        self.conn = None
        self.uses = 0

    def stopping(self):
        return os.path.exists(self.args.stop_marker)

    def connect(self):
        conn = http.client.HTTPSConnection(
            self.args.host, self.args.port, context=self.ctx, timeout=10
        )
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
        with self.stats.lock:
            self.stats.certs.add(hashlib.sha256(der).hexdigest())
        self.conn, self.uses = conn, 0

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def exchange(self):
        """One request on the current connection; returns (status, body)."""
        self.conn.request(
            "POST",
            "/mutate-pods",
            body=self.body,
            headers={"Content-Type": "application/json"},
        )
        resp = self.conn.getresponse()
        data = resp.read()
        self.uses += 1
        if resp.getheader("connection", "").lower() == "close":
            self.close()
        return resp.status, data

    def one(self):
        started = time.perf_counter()
        with self.stats.lock:
            self.stats.sent += 1
        for attempt in (0, 1):
            fresh = False
            try:
                if self.conn is None or self.uses >= self.args.reconnect:
                    self.close()
                    fresh = True
                    self.connect()
                status, data = self.exchange()
            except (ConnectionRefusedError, ConnectionResetError, ssl.SSLError, OSError) as e:
                closed_idle = isinstance(
                    e,
                    (
                        http.client.RemoteDisconnected,
                        BrokenPipeError,
                        ConnectionResetError,
                        ssl.SSLEOFError,
                        ssl.SSLZeroReturnError,
                    ),
                )
                self.close()
                if fresh and self.stopping() and isinstance(
                    e, (ConnectionRefusedError, ConnectionResetError, ssl.SSLEOFError)
                ):
                    with self.stats.lock:
                        self.stats.refused += 1
                    return
                if not fresh and closed_idle and attempt == 0 and self.stopping():
                    with self.stats.lock:
                        self.stats.retried += 1
                    continue
                self.stats.fail(f"{type(e).__name__}: {e} (fresh={fresh})")
                return
            except Exception as e:  # noqa: BLE001 - every other error is a failure
                self.close()
                self.stats.fail(f"{type(e).__name__}: {e}")
                return
            took = (time.perf_counter() - started) * 1000
            try:
                review = json.loads(data)
                good = status == 200 and review["response"]["uid"] == self.uid
            except (ValueError, KeyError, TypeError):
                good = False
            if not good:
                self.stats.fail(f"HTTP {status}: {data[:200]!r}")
                return
            with self.stats.lock:
                self.stats.ok += 1
                self.stats.latencies.append(took)
            return

    def run(self):
        period = self.args.workers / self.args.rate
        next_at = time.monotonic() + period * self.index / self.args.workers
        while not self.stop.is_set():
            now = time.monotonic()
            if now < next_at:
                time.sleep(min(next_at - now, 0.05))
                continue
            next_at += period
            if next_at < now - 1:  # fell far behind: do not burst to catch up
                next_at = now + period
            self.one()
        self.close()


def percentile(sorted_ms, p):
    if not sorted_ms:
        return None
    i = min(len(sorted_ms) - 1, max(0, int(len(sorted_ms) * p / 100)))
    return round(sorted_ms[i], 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--body", required=True, help="AdmissionReview request JSON file")
    ap.add_argument("--duration", type=float, required=True, help="longest run, seconds")
    ap.add_argument("--done-marker", required=True, help="stop once this file exists")
    ap.add_argument("--rate", type=float, default=100, help="requests/s, all workers")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--reconnect", type=int, default=25, help="requests per connection")
    ap.add_argument("--stop-marker", required=True)
    args = ap.parse_args()
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("soak_client: loopback only")

    ctx = ssl.create_default_context(cafile=args.ca)
    with open(args.body, "rb") as f:
        body = f.read()
    uid = json.loads(body)["request"]["uid"]
    stats, stop = Stats(), threading.Event()
    workers = [Worker(args, ctx, body, uid, stats, i, stop) for i in range(args.workers)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline and not os.path.exists(args.done_marker):
        time.sleep(0.1)
    stop.set()
    for w in workers:
        w.join(timeout=15)
    lat = sorted(stats.latencies)
    print(
        json.dumps(
            {
                "sent": stats.sent,
                "ok": stats.ok,
                "failed": stats.failed,
                "refused_after_close": stats.refused,
                "retried_closed_idle": stats.retried,
                "p50_ms": percentile(lat, 50),
                "p99_ms": percentile(lat, 99),
                "max_ms": round(lat[-1], 3) if lat else None,
                "serving_certs_seen": len(stats.certs),
                "failures": stats.failures,
            }
        )
    )


if __name__ == "__main__":
    main()
