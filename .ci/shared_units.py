#!/usr/bin/env python3
"""README's two commands share their compiled dependencies: fails when
`cargo test --no-run` would compile a dependency that `cargo build` (what
`cargo run` builds) compiles too, with other features or on another
dependency.

Cargo compiles a crate once per feature set, then every crate above it
again: a feature a dev-dependency turns on (tokio's `test-util`, say) made
the test command compile tokio, hyper, axum, kube and 28 more crates a
second time. The fix is the same feature in Cargo.toml's [dependencies]
(the unification note there), or a test that does without it.

Reads the two unit graphs (`cargo build --unit-graph`, which plans and
builds nothing; stable cargo with RUSTC_BOOTSTRAP=1) and compares units:
one is reused when its package, target, mode, features and profile match
and every unit it depends on is reused. Registry crates compiled twice
fail; the workspace's own crates are listed (they are compiled for the
tests anyway when the tests turn on a feature of theirs).

    python3 .ci/shared_units.py            # check
    python3 .ci/shared_units.py --new      # also list what the tests add
"""
import json
import os
import subprocess
import sys


def graph(*args):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    out = subprocess.run(
        ["cargo", *args, "--locked", "--unit-graph", "-Z", "unstable-options"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    units = json.loads(out)["units"]
    memo = {}

    def key(i):
        if i not in memo:
            u = units[i]
            # Cargo's own comparison leaves out the profile's name (`dev`
            # for `cargo build`, `test` for `cargo test`'s dependencies).
            p = {k: v for k, v in u["profile"].items() if k != "name"}
            memo[i] = hash((
                u["pkg_id"], u["target"]["name"], tuple(u["target"]["kind"]), u["mode"],
                tuple(sorted(u["features"])), json.dumps(p, sort_keys=True), u.get("platform"),
                tuple(sorted(key(d["index"]) for d in u["dependencies"])),
            ))
        return memo[i]

    return units, [key(i) for i in range(len(units))]


def name(u):
    pkg = u["pkg_id"].split("#")[-1]
    return f'{pkg} {u["target"]["name"]} ({u["mode"]})'


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    run_units, run_keys = graph("build")
    test_units, test_keys = graph("test", "--no-run")
    built = set(run_keys)
    names = {(u["pkg_id"], u["target"]["name"], u["mode"]) for u in run_units}
    added = [i for i, k in enumerate(test_keys) if k not in built]
    again = [i for i in added
             if (test_units[i]["pkg_id"], test_units[i]["target"]["name"], test_units[i]["mode"]) in names]
    registry = [i for i in again if test_units[i]["pkg_id"].startswith("registry+")]
    print(f"cargo build: {len(run_units)} units; cargo test --no-run: {len(test_units)}, "
          f"of which {len(added)} not built by cargo build, {len(again)} of those compiled again")
    for i in again:
        kind = "FAIL" if i in registry else "note (workspace crate)"
        print(f"  {kind}: {name(test_units[i])} again, features {','.join(test_units[i]['features']) or '-'}")
    if "--new" in sys.argv:
        for i in added:
            if i not in again:
                print(f"  new: {name(test_units[i])}")
    if registry:
        print(f"{len(registry)} dependencies compiled twice: turn the feature on in Cargo.toml's "
              "[dependencies] (see the unification note) or do without it in the tests")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
