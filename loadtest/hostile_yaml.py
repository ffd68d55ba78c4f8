#!/usr/bin/env python3
"""Prints a YAML document whose anchors nest inside anchored nodes, each
level aliasing a list that is itself made of aliases. A reader that keeps a
copy of every anchored node holds about `levels` times what the document
expands to (levels^2 times one level's expansion), though the document
itself stays within the reader's budget: 1 MB of pod that expands to
58 MiB held 1.7 GiB.

The shape, for --levels 3 (`e` is a list of --aliases aliases of one
scalar `s`, which fills the requested --size unless --scalar says less):

    s: &s xxxx...
    e: &e [*s, *s]
    n: &a1 {k: &b1 {v: *e, w: &a2 {k: &b2 {v: *e, w: &a3 {k: &b3 {v: *e}}}}}}
    again1: *a1         # with --over: again2, ... past --expand

Shapes (--shape):
  pod        a Pod for `mutate`; the nested node sits in
             metadata.managedFields[0].fieldsV1, which the Pod schema leaves
             free, so a reader that accepts it mutates the pod (exit 0)
  configmap  an inferenceservice-config ConfigMap for `--config` (and a
             `serve --config` reload); the node sits in
             metadata.managedFields[0].fieldsV1; its data is --data's (a
             ConfigMap manifest whose text is copied, its data kept), else
             empty
  settings   our settings file for `--config-file`; the node sits in
             modelVolume.ephemeral.volumeClaimTemplate.metadata
             .managedFields[0].fieldsV1

By default the document expands to at most --expand bytes (60 MiB, just
within the default 64 MiB budget) over as many levels as the shape can nest
within 64 levels; a reader that counts what every alias expands to reads it
within its budget (or, with --over, refuses it at the budget). What it
expands to is written to stderr. Within the budget, what the command does
with the document still costs: `mutate` holds a 58 MiB pod about three
times (near 200 MB, as it does the same pod written flat), a `serve`
reload of a 58 MiB ConfigMap peaks about 60 MiB over the server's resident
set; past the budget, nothing is built.

Examples:

    python3 loadtest/hostile_yaml.py --shape pod --size 1000000 > pod.yaml
    /usr/bin/time -f '%M KiB' kserve-injector mutate pod.yaml >/dev/null
    python3 loadtest/hostile_yaml.py --shape configmap --size 100000 --over \\
        --data core/src/config/shipped/head.yaml > inferenceservice-config.yaml
"""
import argparse
import sys

MIB = 1 << 20
# Mappings and sequences the reader accepts (its depth budget).
MAX_DEPTH = 64


def shape_frame(shape):
    """(text before the nested node, its indent, the depth of the mapping
    that holds it, text after it)."""
    managed = "  managedFields:\n  - manager: hostile\n    operation: Apply\n    fieldsType: FieldsV1\n    fieldsV1:\n"
    if shape == "pod":
        head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hostile\n" + managed
        tail = "spec:\n  containers:\n  - name: kserve-container\n    image: x\n"
        # root, metadata, managedFields, its item, fieldsV1
        return head, "      ", 5, tail
    if shape == "configmap":
        head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inferenceservice-config\n  namespace: kserve\n" + managed
        return head, "      ", 5, None
    if shape == "settings":
        head = (
            "modelVolume:\n  ephemeral:\n    volumeClaimTemplate:\n      metadata:\n"
            "        managedFields:\n        - manager: hostile\n          operation: Apply\n"
            "          fieldsType: FieldsV1\n          fieldsV1:\n"
        )
        tail = (
            "      spec:\n        accessModes: [ReadWriteOnce]\n"
            "        resources: {requests: {storage: 1Gi}}\n"
        )
        # root, modelVolume, ephemeral, volumeClaimTemplate, metadata,
        # managedFields, its item, fieldsV1
        return head, "            ", 8, tail
    raise ValueError(shape)


def data_of(path):
    """The `data:` block of a ConfigMap manifest, as written."""
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    out, inside = [], False
    for line in lines:
        if line.startswith("data:"):
            inside = True
        elif inside and line.strip() and not line.startswith((" ", "#")):
            break
        if inside:
            out.append(line)
    if not out:
        sys.exit(f"{path}: no data: block at the top level")
    return "".join(out)


def nested(levels):
    """The nested node: levels of `&aI {k: &bI {v: *e, w: ...}}`."""
    text = "{v: *e}"
    for i in range(levels, 0, -1):
        inner = text if i == levels else "{v: *e, w: %s}" % text
        text = "&a%d {k: &b%d %s}" % (i, i, inner)
    return text


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", choices=["pod", "configmap", "settings"], default="pod")
    p.add_argument("--size", type=int, default=1_000_000,
                   help="bytes of the document, about (default 1000000)")
    p.add_argument("--expand", type=int, default=60 * MIB,
                   help="bytes of text the document expands to, at most (default 60 MiB)")
    p.add_argument("--scalar", type=int,
                   help="bytes of the aliased scalar (default: what fills --size; "
                        "a smaller one leaves the rest to an unaliased `pad` scalar)")
    p.add_argument("--levels", type=int,
                   help="nested anchor levels (default: as many as --expand and 64 levels of nesting allow)")
    p.add_argument("--aliases", type=int,
                   help="aliases of the scalar in the list each level aliases (default: what --expand allows)")
    p.add_argument("--over", action="store_true",
                   help="then alias the outermost node as often as takes the expansion past --expand")
    p.add_argument("--data", metavar="MANIFEST",
                   help="configmap shape: the ConfigMap manifest whose data: block to copy")
    args = p.parse_args()

    head, indent, holder_depth, tail = shape_frame(args.shape)
    if args.shape == "configmap":
        tail = data_of(args.data) if args.data else "data: {}\n"
    # Each level nests two mappings; the innermost list one more.
    deepest = (MAX_DEPTH - holder_depth - 1) // 2
    levels = args.levels or deepest
    if levels > deepest:
        print(f"hostile_yaml: {levels} levels nest past {MAX_DEPTH}: a reader refuses "
              f"the document for its depth (at most {deepest} here)", file=sys.stderr)
    room = args.size - len(head) - len(tail) - len(nested(levels)) - 200
    scalar = args.scalar or max(room, 16)
    pad = max(room - scalar, 0) if args.scalar else 0
    # The scalar is read once, then copied by `e` and by each level's `v`.
    copies = max((args.expand - pad) // scalar - 1, 2)
    if args.levels is None:
        levels = max(1, min(deepest, copies - 1))
    aliases = args.aliases or max(1, copies // (levels + 1))

    out = sys.stdout
    out.write(head)
    out.write(f"{indent}s: &s {'x' * scalar}\n")
    if pad:
        out.write(f"{indent}pad: {'x' * pad}\n")
    out.write(f"{indent}e: &e [{', '.join(['*s'] * aliases)}]\n")
    out.write(f"{indent}n: {nested(levels)}\n")
    level = levels * aliases * scalar
    again = args.expand // level + 1 if args.over else 0
    # Beside `n`, not in a list: as deep as it may nest.
    for i in range(1, again + 1):
        out.write(f"{indent}again{i}: *a1\n")
    out.write(tail)
    once = scalar * (1 + aliases * (levels + 1)) + pad
    expands = once + again * level
    print(
        f"hostile_yaml: {args.shape}, {levels} levels, {aliases} aliases of a "
        f"{scalar}-byte scalar: expands to {expands / MIB:.1f} MiB",
        file=sys.stderr,
    )


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        # The reader stopped reading (`| head`): nothing more to say.
        sys.stderr.close()
