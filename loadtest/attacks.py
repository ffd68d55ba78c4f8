#!/usr/bin/env python3
"""Replays, at their original scale, two attacks the server was first tried
with (issue 9), against the release binary over loopback, and prints what
it measured. tests/server/attacks.rs checks the same behaviours at a smaller
scale on every CI run; this is for the figures.

1. silent-h2: with an open-file limit of 256, 243 TLS connections that
   negotiate h2 and never send the HTTP/2 preface. Reported: when the server
   closed them (seconds after their handshake), how many it accepted at all
   while the cap held, and the real requests sent every 0.5 s meanwhile (curl,
   each allowed 15 s): their statuses and slowest time.
2. big-bodies: 40 HTTP/1.1 connections each declaring a 7 MiB - 1 body and
   sending all of it but the last byte, then holding. Reported: the server's
   RSS before, after the bodies were sent, and its peak; what each got (503
   when its declared length does not fit --max-buffered-bytes, 504 when the
   body is not complete within --request-timeout); and a real request's
   status and time meanwhile.

    python3 loadtest/attacks.py [silent-h2|big-bodies ...]

Needs curl; builds nothing (run `cargo build --release` first).
"""
import os
import resource
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "kserve-injector")
REVIEW = os.path.join(ROOT, "benches", "inputs", "minimal-oci.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, tmp, nofile=None, flags=()):
        self.port, self.admin = free_port(), free_port()
        self.ca = os.path.join(tmp, "ca.crt")
        limit = None
        if nofile:
            def limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.log = open(os.path.join(tmp, "serve.log"), "w")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--self-signed", "--self-signed-ca-file", self.ca,
             "--addr", f"127.0.0.1:{self.port}", "--admin-addr", f"127.0.0.1:{self.admin}",
             "--cluster-lookups", "off", "--shutdown-delay", "0s", *flags],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=limit)
        for _ in range(200):
            if os.path.exists(self.ca) and self.curl_admin("/healthz") == "200":
                return
            time.sleep(0.05)
        raise SystemExit("the server did not come up")

    def curl_admin(self, path):
        out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                              "--max-time", "2", f"http://127.0.0.1:{self.admin}{path}"],
                             capture_output=True, text=True)
        return out.stdout

    def review(self, timeout=15):
        started = time.monotonic()
        out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                              "--max-time", str(timeout), "--cacert", self.ca,
                              "-H", "content-type: application/json",
                              "--data-binary", "@" + REVIEW,
                              f"https://127.0.0.1:{self.port}/mutate-pods"],
                             capture_output=True, text=True)
        return out.stdout or "none", time.monotonic() - started

    def context(self, alpn):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.set_alpn_protocols([alpn])
        return ctx

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def silent_h2(tmp):
    server = Server(tmp, nofile=256)
    ctx = server.context("h2")
    opened, refused_handshake = [], 0
    lock = threading.Lock()

    def attacker():
        nonlocal refused_handshake
        try:
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            tls = ctx.wrap_socket(raw, server_hostname="localhost")
        except OSError:
            with lock:
                refused_handshake += 1
            return
        start = time.monotonic()
        with lock:
            opened.append((tls, start))

    threads = [threading.Thread(target=attacker) for _ in range(243)]
    for t in threads:
        t.start()
    time.sleep(1)
    real, stop = [], threading.Event()

    def prober():
        while not stop.is_set():
            real.append(server.review())
            time.sleep(0.5)

    probe = threading.Thread(target=prober)
    probe.start()
    closes = []

    def wait_close(tls, start):
        tls.settimeout(60)
        try:
            while tls.recv(1024):
                pass
        except OSError:
            pass
        closes.append(time.monotonic() - start)

    for t in threads:
        t.join()
    waiters = [threading.Thread(target=wait_close, args=c) for c in opened]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join()
    time.sleep(1)
    stop.set()
    probe.join()
    server.stop()
    codes = {}
    for code, _ in real:
        codes[code] = codes.get(code, 0) + 1
    closes.sort()
    print(f"silent-h2: 243 preface-less h2 connections, open-file limit 256 "
          f"(--max-connections default: 3/4 of it); handshakes completed {len(opened)}, "
          f"failed {refused_handshake}; closed by the server {closes[0]:.2f}-{closes[-1]:.2f} s "
          f"after their handshake (median {closes[len(closes) // 2]:.2f} s); "
          f"real requests meanwhile: {len(real)}, statuses {codes}, "
          f"slowest {max(t for _, t in real):.2f} s")


def big_bodies(tmp):
    server = Server(tmp)
    pid = server.proc.pid
    before = rss_kib(pid)
    ctx = server.context("http/1.1")
    size = 7 * 1024 * 1024 - 1
    chunk = b"x" * 65536
    socks, answers = [], []
    lock = threading.Lock()

    def attacker():
        tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                              server_hostname="localhost")
        tls.sendall(b"POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\n"
                    b"Content-Type: application/json\r\n"
                    + f"Content-Length: {size}\r\n\r\n".encode())
        sent, answer = 0, b""
        while sent < size - 1:
            n = min(len(chunk), size - 1 - sent)
            try:
                tls.sendall(chunk[:n])
                if select.select([tls], [], [], 0)[0]:
                    answer += tls.recv(4096)
                    break
            except OSError:
                break
            sent += n
        tls.settimeout(2)
        try:
            answer += tls.recv(4096)
        except OSError:
            pass
        status = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "no answer (held)"
        with lock:
            socks.append(tls)
            answers.append(status)

    threads = [threading.Thread(target=attacker) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1)
    holding, peak = rss_kib(pid), rss_kib(pid, "VmHWM")
    probe = server.review()
    for s in socks:
        s.close()
    server.stop()
    counts = {}
    for a in answers:
        counts[a] = counts.get(a, 0) + 1
    print(f"big-bodies: 40 connections x 7 MiB - 1 held (--max-buffered-bytes default 64 MiB): "
          f"RSS {before / 1024:.1f} MiB before, {holding / 1024:.1f} MiB after sending, "
          f"peak {peak / 1024:.1f} MiB; answers {counts}; a real request meanwhile: "
          f"{probe[0]} in {probe[1]:.2f} s")


def main():
    attacks = {"silent-h2": silent_h2, "big-bodies": big_bodies}
    chosen = sys.argv[1:] or list(attacks)
    for name in chosen:
        if name not in attacks:
            raise SystemExit(f"unknown attack {name}; known: {', '.join(attacks)}")
    if not os.path.exists(BIN):
        raise SystemExit(f"{BIN} is missing: cargo build --release --locked")
    for name in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            attacks[name](tmp)


if __name__ == "__main__":
    main()
