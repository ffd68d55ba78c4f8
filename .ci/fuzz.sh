#!/usr/bin/env bash
# Fuzz pass: each cargo-fuzz target (fuzz/fuzz_targets/*) for a bounded time.
#
#   bash .ci/fuzz.sh              # 60 s per target
#   bash .ci/fuzz.sh 600          # 10 minutes per target
#   RUNS=10000000 bash .ci/fuzz.sh 0 review    # an execution count instead
#   bash .ci/fuzz.sh 60 review config          # only these targets
#   JOBS=2 MAX_LEN=8192 bash .ci/fuzz.sh 3600  # two processes, smaller inputs
#   PARALLEL=1 bash .ci/fuzz.sh                # one target at a time
#
# Needs a nightly toolchain (skipped with a note when there is none) and
# cargo-fuzz (installed when missing). Committed crash reproducers in
# fuzz/regressions/<target>/ are replayed first; seeds come from fixtures/,
# benches/inputs/ and fuzz/seeds/<target>/. Instrumented without a sanitizer
# (ASan makes the review target several times slower; the code under test is
# safe Rust), with libFuzzer's RSS and malloc limits. Prints executions and
# wall time per target; exits non-zero on a crash, leaving the input in
# fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=(review config reader shadow)
RUNS=${RUNS:-0}          # 0: no execution cap
JOBS=${JOBS:-1}
RSS_LIMIT_MB=${RSS_LIMIT_MB:-2048}
MALLOC_LIMIT_MB=${MALLOC_LIMIT_MB:-1024}
MAX_LEN=${MAX_LEN:-0}    # 0: libFuzzer's default (the largest seed)
# Targets fuzzed at once: the cores over the processes each one forks.
PARALLEL=${PARALLEL:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
limits=(-rss_limit_mb="$RSS_LIMIT_MB" -malloc_limit_mb="$MALLOC_LIMIT_MB" -timeout=10)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: no nightly toolchain; skipped (rustup toolchain install nightly to run it)"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

# The instrumented build is the slowest step of CI: keep it outside the
# clone so a fresh checkout on the same machine reuses it.
export FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-$HOME/.cache/kserve-injector/fuzz-target}
fuzz() { CARGO_TARGET_DIR=$FUZZ_TARGET_DIR cargo +nightly fuzz "$@"; }

echo "== building fuzz targets"
build_started=$(date +%s)
for target in "${TARGETS[@]}"; do
  fuzz build --sanitizer none "$target" 2>&1 | tail -1
done
echo "fuzz: build took $(( $(date +%s) - build_started )) s"

# --- seed corpora (regenerated each run; libFuzzer adds what it finds) ------
seed_review() {
  local dir=$1 bin=${CARGO_TARGET_DIR:-target}/debug/examples/baseline_server
  cp benches/inputs/*.json "$dir/"
  if [ ! -x "$bin" ]; then cargo build --locked --example baseline_server 2>&1 | tail -1; fi
  for case in fixtures/*/; do
    "$bin" review "$case/input.yaml" >"$dir/fixture-$(basename "$case").json" 2>/dev/null \
      || rm -f "$dir/fixture-$(basename "$case").json"
  done
}
# The shadow target reads what the review target reads.
seed_shadow() { seed_review "$@"; }
seed_config() {
  local dir=$1 n=0
  for file in core/src/config/shipped/*.yaml fixtures/*/config.yaml; do
    [ -f "$file" ] || continue
    n=$((n + 1))
    # First byte selects the form: 0 manifest text, 2 manifest file.
    { printf '\x00'; cat "$file"; } >"$dir/manifest-$n"
    { printf '\x02'; cat "$file"; } >"$dir/file-$n"
  done
}
seed_reader() {
  local dir=$1
  for input in fixtures/*/input.yaml; do cp "$input" "$dir/input-$(basename "$(dirname "$input")").yaml"; done
  cp benches/inputs/minimal-oci.json benches/inputs/typical.json "$dir/"
}

status=0
# Seeds and regression replays first, one target after another.
for target in "${TARGETS[@]}"; do
  corpus=fuzz/corpus/$target
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  "seed_$target" "$corpus"
  cp fuzz/seeds/"$target"/* "$corpus/" 2>/dev/null || true
  regressions=(fuzz/regressions/"$target"/*)
  if [ -e "${regressions[0]}" ]; then
    echo "== $target: replaying ${#regressions[@]} regression inputs"
    fuzz run --sanitizer none "$target" "${regressions[@]}" -- \
      "${limits[@]}" -runs=1 2>&1 | tail -2 || status=1
  fi
done

# Then the fuzzing itself, PARALLEL targets at a time: a libFuzzer process
# uses one core, so on CI's two cores two targets run side by side, each for
# its full time, and the step takes half as long as running them in turn.
fuzz_target() { # target -> its run's log, exit status and seconds beside the log
  local target=$1 corpus=fuzz/corpus/$1 log=fuzz/artifacts/$1/last-run.log started=$SECONDS
  local dict=() args
  [ -f "fuzz/dicts/$target.dict" ] && dict=(-dict="fuzz/dicts/$target.dict")
  args=("${limits[@]}" "${dict[@]}" -artifact_prefix="fuzz/artifacts/$target/" -print_final_stats=1)
  [ "$SECONDS_PER_TARGET" -gt 0 ] && args+=(-max_total_time="$SECONDS_PER_TARGET")
  [ "$RUNS" -gt 0 ] && args+=(-runs="$RUNS")
  [ "$MAX_LEN" -gt 0 ] && args+=(-max_len="$MAX_LEN")
  if [ "$JOBS" -gt 1 ]; then args+=(-fork="$JOBS" -ignore_crashes=0); fi
  local rc=0
  fuzz run --sanitizer none "$target" "$corpus" -- "${args[@]}" >"$log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - started))" >"$log.status"
}
running=0
for target in "${TARGETS[@]}"; do
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "== $target: fuzzing (${SECONDS_PER_TARGET}s, runs cap ${RUNS}, jobs ${JOBS})"
  rm -f "fuzz/artifacts/$target/last-run.log.status"
  fuzz_target "$target" &
  running=$((running + 1))
done
wait

for target in "${TARGETS[@]}"; do
  log=fuzz/artifacts/$target/last-run.log
  if [ -f "$log.status" ]; then read -r rc took <"$log.status"; else rc=unfinished took=0; fi
  if [ "$rc" = 0 ]; then result=ok; else result=CRASH; status=1; fi
  execs=$(awk '/stat::number_of_executed_units:/ { s += $2 } END { print s + 0 }' "$log")
  if [ "$execs" -eq 0 ]; then
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  fi
  echo "fuzz: $target: $result, ${execs:-0} executions in $took s, corpus $(ls "fuzz/corpus/$target" | wc -l) inputs"
  if [ "$result" = CRASH ]; then
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -10 >&2 || true
  fi
done
exit "$status"
