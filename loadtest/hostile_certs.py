#!/usr/bin/env python3
"""Certificate files `serve` must refuse, for red-team scripts that rotate
them into a running server's --cert-dir (tests/server/proven_certs.rs and
tests/server/reloader_fifo.rs check the same cases on every CI run).

    python3 loadtest/hostile_certs.py make OUT [--binary PATH]
    python3 loadtest/hostile_certs.py place OUT CASE CERT_DIR

`make` writes, with `kserve-injector certs` (Service kserve-injector in
namespace kserve; trust OUT/good/ca.crt and resolve
kserve-injector.kserve.svc to the server):

    OUT/good/       tls.crt, tls.key, ca.crt: the pair to start with
    OUT/rotation/   tls.crt, tls.key: a valid rotation (same CA) for after
    OUT/<case>/     tls.crt, tls.key: one hostile case each
    OUT/cases.tsv   one line per case: name, then the text of the refusal
                    in the server's ERROR log (field "error")

`place` puts OUT/<case> (or good, or rotation) into CERT_DIR the way
kubelet updates a mounted Secret: a new `..<version>` directory, then an
atomic swap of the `..data` symlink, `tls.crt` and `tls.key` linking
through it. Start the server with --cert-dir CERT_DIR after placing
`good`. The case `fifo` places a FIFO as tls.crt (never copy one with cp:
cp would wait to read it).

An expired leaf is not among the cases: `certs --days` starts at 1 (the
tests make one with rcgen).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

EXTRA_BLOCK = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
EMPTY_BLOCK = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"


def certs(binary, out, new_ca=False):
    args = [binary, "certs", "--service", "kserve-injector", "--namespace", "kserve", "--out", out]
    if new_ca:
        args.append("--new-ca")
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)}: {done.stderr.strip()}")


def read(path):
    with open(path) as f:
        return f.read()


def write_case(out, name, cert, key):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for file, text in (("tls.crt", cert), ("tls.key", key)):
        if text is not None:
            with open(os.path.join(out, name, file), "w") as f:
                f.write(text)


def make(out, binary):
    good = os.path.join(out, "good")
    certs(binary, good)
    rotation = os.path.join(out, "rotation")
    os.makedirs(rotation, exist_ok=True)
    for f in ("ca.crt", "ca.key"):
        shutil.copy(os.path.join(good, f), rotation)
    certs(binary, rotation)  # reuses the CA: the same caBundle verifies it
    for f in ("ca.crt", "ca.key"):
        os.remove(os.path.join(rotation, f))
    with tempfile.TemporaryDirectory() as scratch:
        # Same CA name, another key: it did not sign the good leaf.
        certs(binary, os.path.join(scratch, "impostor"), new_ca=True)
        impostor_ca = read(os.path.join(scratch, "impostor", "ca.crt"))
        certs(binary, os.path.join(scratch, "other"), new_ca=True)
        other_key = read(os.path.join(scratch, "other", "tls.key"))
    leaf, key, ca = (read(os.path.join(good, f)) for f in ("tls.crt", "tls.key", "ca.crt"))
    second = len(leaf.splitlines()) + 1
    ca_lines = ca.splitlines()
    half = "\n".join(ca_lines[: len(ca_lines) // 2]) + "\n"
    cases = [
        ("extra-block", leaf + EXTRA_BLOCK, key,
         f"block 2 (line {second}) is not an X.509 certificate"),
        ("truncated-ca", leaf + half + "-----END CERTIFICATE-----\n", key,
         f"block 2 (line {second}) is not an X.509 certificate"),
        ("ca-cut-short", leaf + half, key, f"block 2 (line {second}) has no END line"),
        ("empty-block", leaf + EMPTY_BLOCK, key, f"block 2 (line {second}) is empty"),
        ("text-outside", "subject=CN = kserve-injector.kserve.svc\n" + leaf, key,
         "line 1 holds text outside a PEM block"),
        ("wrong-issuer", leaf + impostor_ca, key, "certificate 1 names certificate 2's subject"),
        ("key-mismatch", leaf, other_key, "do not form a usable pair"),
        ("fifo", None, key, "a FIFO where a regular file is required"),
    ]
    with open(os.path.join(out, "cases.tsv"), "w") as index:
        for name, cert, case_key, says in cases:
            write_case(out, name, cert, case_key)
            index.write(f"{name}\t{says}\n")
    print(f"wrote {len(cases)} cases, good and rotation into {out}")


def place(out, case, cert_dir):
    source = os.path.join(out, case)
    if not os.path.isdir(source):
        sys.exit(f"no case {case!r} in {out}")
    os.makedirs(cert_dir, exist_ok=True)
    version = 0
    while os.path.exists(os.path.join(cert_dir, f"..v{version}")):
        version += 1
    new = f"..v{version}"
    new_dir = os.path.join(cert_dir, new)
    os.mkdir(new_dir)
    for name in ("tls.crt", "tls.key"):
        path = os.path.join(source, name)
        if os.path.isfile(path):
            shutil.copy(path, new_dir)
        elif case == "fifo" and name == "tls.crt":
            os.mkfifo(os.path.join(new_dir, name))
    data, tmp = os.path.join(cert_dir, "..data"), os.path.join(cert_dir, "..data_tmp")
    old = os.readlink(data) if os.path.islink(data) else None
    os.symlink(new, tmp)
    os.replace(tmp, data)
    for name in ("tls.crt", "tls.key"):
        link = os.path.join(cert_dir, name)
        if not os.path.islink(link):
            os.symlink(f"..data/{name}", link)
    if old:
        shutil.rmtree(os.path.join(cert_dir, old))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--binary", default="target/release/kserve-injector")
    p = sub.add_parser("place")
    p.add_argument("out")
    p.add_argument("case")
    p.add_argument("cert_dir")
    args = parser.parse_args()
    if args.command == "make":
        make(args.out, args.binary)
    else:
        place(args.out, args.case, args.cert_dir)


if __name__ == "__main__":
    main()
