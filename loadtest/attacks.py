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
2. idle-h2: with the default --max-connections (4096), 4096 TLS connections
   that negotiate h2, send one review, read its answer and stay open, idle
   (answering the server's keep-alive pings). Then a real client sends 200
   reviews one after another, each on a new connection (curl), as a client
   whose connections were closed must. Reported: the real requests' statuses
   and latency (p50, p99, slowest), how many idle connections the server
   closed for them, and the server's peak RSS.
3. big-bodies: 40 HTTP/1.1 connections each declaring a 7 MiB - 1 body and
   sending all of it but the last byte, then holding. Reported: the server's
   RSS before, after the bodies were sent, and its peak; what each got (503
   when its declared length does not fit --max-buffered-bytes, 504 when the
   body is not complete within --request-timeout); and a real request's
   status and time meanwhile.

    python3 loadtest/attacks.py [silent-h2|idle-h2|big-bodies ...]

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
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "kserve-injector")
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


def h2_frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(name, value):
    """A header field without indexing, its name a literal (RFC 7541 6.2.2)."""
    def string(text):
        data = text.encode()
        assert len(data) < 127
        return bytes([len(data)]) + data
    return b"\x00" + string(name) + string(value)


def h2_review_request(body):
    headers = b"".join(hpack_literal(n, v) for n, v in [
        (":method", "POST"), (":scheme", "https"), (":path", "/mutate-pods"),
        (":authority", "localhost"), ("content-type", "application/json")])
    return (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)
            + h2_frame(1, 0x4, 1, headers) + h2_frame(0, 0x1, 1, body))


def h2_frames(buffer):
    """Complete frames at the head of `buffer`, and the rest."""
    frames = []
    while len(buffer) >= 9:
        length = int.from_bytes(buffer[:3], "big")
        if len(buffer) < 9 + length:
            break
        kind, flags = buffer[3], buffer[4]
        stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
        frames.append((kind, flags, stream, buffer[9:9 + length]))
        buffer = buffer[9 + length:]
    return frames, buffer


def h2_answer(frames):
    """What a client owes the server for `frames`: SETTINGS and PING acks."""
    out = b""
    for kind, flags, _, payload in frames:
        if kind == 4 and not flags & 1:
            out += h2_frame(4, 1, 0)
        elif kind == 6 and not flags & 1:
            out += h2_frame(6, 1, 0, payload)
    return out


def idle_h2(tmp):
    import selectors
    held_count, real_count = 4096, 200
    server = Server(tmp)
    ctx = server.context("h2")
    with open(REVIEW, "rb") as f:
        request = h2_review_request(f.read())
    held, failed = [], 0
    lock = threading.Lock()

    def holder(n):
        nonlocal failed
        for _ in range(n):
            try:
                tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=60),
                                      server_hostname="localhost")
                tls.sendall(request)
                buffer, done = b"", False
                while not done:
                    data = tls.recv(65536)
                    if not data:
                        raise OSError("closed before the answer")
                    frames, buffer = h2_frames(buffer + data)
                    tls.sendall(h2_answer(frames))
                    done = any(s == 1 and f & 1 for _, f, s, _ in frames)
                with lock:
                    held.append(tls)
            except OSError:
                with lock:
                    failed += 1

    started = time.monotonic()
    threads = [threading.Thread(target=holder, args=(held_count // 32,)) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    opened = time.monotonic() - started
    open_now = subprocess.run(["curl", "-s", f"http://127.0.0.1:{server.admin}/metrics"],
                              capture_output=True, text=True).stdout
    open_line = [l for l in open_now.splitlines() if l.startswith("kserve_injector_open_connections ")]
    # The holders answer the server's keep-alive pings, as a live client would.
    stop, closed_by_server = threading.Event(), [0]
    selector = selectors.DefaultSelector()
    buffers = {}
    for tls in held:
        tls.setblocking(False)
        selector.register(tls, selectors.EVENT_READ)
        buffers[tls] = b""

    def keep_alive():
        while not stop.is_set():
            for key, _ in selector.select(timeout=0.2):
                tls = key.fileobj
                try:
                    data = tls.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(tls)
                    closed_by_server[0] += 1
                    continue
                frames, buffers[tls] = h2_frames(buffers[tls] + data)
                try:
                    tls.sendall(h2_answer(frames))
                except (OSError, ssl.SSLWantWriteError):
                    pass

    pinger = threading.Thread(target=keep_alive)
    pinger.start()
    real = [server.review() for _ in range(real_count)]
    time.sleep(1)
    stop.set()
    pinger.join()
    metrics = subprocess.run(["curl", "-s", f"http://127.0.0.1:{server.admin}/metrics"],
                             capture_output=True, text=True).stdout
    evicted = [l for l in metrics.splitlines() if l.startswith("kserve_injector_connection_evictions_total ")]
    peak = rss_kib(server.proc.pid, "VmHWM")
    for tls in held:
        tls.close()
    server.stop()
    codes = {}
    for code, _ in real:
        codes[code] = codes.get(code, 0) + 1
    times = sorted(t for _, t in real)
    pct = lambda p: times[min(len(times) - 1, int(len(times) * p))]
    print(f"idle-h2: {len(held)} answered, idle h2 connections held ({failed} failed), opened in "
          f"{opened:.1f} s; {open_line[0] if open_line else 'open connections unknown'}; "
          f"then {real_count} real requests, each on a new connection (curl): statuses {codes}, "
          f"p50 {pct(0.5) * 1000:.0f} ms, p99 {pct(0.99) * 1000:.0f} ms, slowest {times[-1] * 1000:.0f} ms; "
          f"idle connections closed by the server meanwhile {closed_by_server[0]} "
          f"({evicted[0] if evicted else 'evictions unknown'}); server peak RSS {peak / 1024:.1f} MiB")


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
    attacks = {"silent-h2": silent_h2, "idle-h2": idle_h2, "big-bodies": big_bodies}
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
