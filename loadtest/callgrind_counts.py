#!/usr/bin/env python3
"""Totals of a callgrind dump: instructions, and how often some functions
were called (allocator calls, tasks spawned, timers armed), summed over
every caller. With two dumps and --per N, prints (second - first) / N: the
cost of the N requests the second dump had more than the first.

    python3 loadtest/callgrind_counts.py FILE
    python3 loadtest/callgrind_counts.py --per 1000 FIRST SECOND
"""

import re
import sys

# Entry points counted: each is called once per event and does not call
# another counted one. Rust's allocator shims, whatever allocator is behind
# them; a new tokio task (spawned on the runtime, blocking pool aside); a timer entry registered in the timer wheel.
COUNTED = {
    "allocations": re.compile(r"^(__rustc::)?__rust_(alloc|alloc_zeroed|realloc)$"),
    "tasks": re.compile(r"^tokio::runtime::task_hooks::TaskHooks::spawn$"),
    "timers": re.compile(r"^tokio::runtime::time::<impl tokio::runtime::time::handle::Handle>::reregister$"),
}


def counts(path):
    names = {}
    totals = {key: 0 for key in COUNTED}
    instructions = None
    callee = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                key, _, rest = line.rstrip("\n").partition("=")
                m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
                if m:
                    if m.group(2) is not None:
                        names[m.group(1)] = m.group(2)
                    name = names.get(m.group(1), "")
                else:
                    name = rest
                callee = name if key == "cfn" else None
            elif line.startswith("calls=") and callee is not None:
                n = int(line[6:].split()[0])
                for key, pattern in COUNTED.items():
                    if pattern.search(callee):
                        totals[key] += n
            elif line.startswith(("summary:", "totals:")):
                instructions = int(line.split()[1])
    if instructions is None:
        sys.exit(f"{path}: no totals line")
    return instructions, totals


def main(argv):
    per = 1
    if argv[:1] == ["--per"]:
        per, argv = int(argv[1]), argv[2:]
    if len(argv) == 1:
        base, (ins, tot) = (0, {k: 0 for k in COUNTED}), counts(argv[0])
    elif len(argv) == 2:
        base, (ins, tot) = counts(argv[0]), counts(argv[1])
    else:
        sys.exit(__doc__)
    values = [ins - base[0]] + [tot[k] - base[1][k] for k in COUNTED]
    print(" ".join(f"{v / per:.1f}" if i else f"{round(v / per)}" for i, v in enumerate(values)))


if __name__ == "__main__":
    main(sys.argv[1:])
