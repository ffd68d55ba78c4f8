# shellcheck shell=bash
# What the loadtest scripts share: the tool check, the release build, the
# request bodies, the yardsticks' answers and `serve`'s command line, so
# every script measures the same binaries on the same bodies. Sourced from
# the repository's root after the script sets PORT and ADMIN_PORT.

need() { # tools... -> exit 2 naming the first one missing
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$tool is missing" >&2; exit 2; }
  done
}

# Line tables name the lines in a profile and do not change the code, so
# one build serves every script. Sets `bin` and `base`.
build_release() {
  export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
  cargo build --release --locked --bin kserve-injector --example baseline_server 2>&1 | tail -1 >&2
  local target=${CARGO_TARGET_DIR:-target}
  bin=$target/release/kserve-injector
  base=$target/release/examples/baseline_server
}

# A scratch directory in `work`, with the small yardstick's fixed answer.
make_work() {
  work=$(mktemp -d)
  printf '%s' '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"0b6f1d84-5d2e-4c2a-9a43-3c1e7f6f0001","allowed":true}}' >"$work/small.json"
}

# The AdmissionReview of body NAME, written into `work`; prints its path.
#   pass: fixtures/f01-non-isvc-pod, a pod we leave alone;
#   oci: fixtures/m3-modelcar-oci, the 1.1 KB modelcar review;
#   typical: benches/inputs/typical.json, the 23 KB pod.
body_file() { # name
  case $1 in
    pass) "$base" review fixtures/f01-non-isvc-pod/input.yaml >"$work/pass.json" ;;
    oci) "$base" review fixtures/m3-modelcar-oci/input.yaml >"$work/oci.json" ;;
    typical) cp benches/inputs/typical.json "$work/typical.json" ;;
    *) echo "unknown body $1 (pass, oci, typical)" >&2; exit 2 ;;
  esac
  echo "$work/$1.json"
}

# `serve`'s answer to BODY-FILE, beside it as BODY-FILE.response: the bytes
# the baseline yardstick sends back. `mutate` answers an AdmissionReview
# with the response the webhook sends.
answer_of() { # body-file
  "$bin" mutate "$1" >"$1.response"
}

# `serve` as every script runs it: self-signed, no cluster lookups, no
# shutdown delay, on PORT with its admin port on ADMIN_PORT. Sets the array
# `serve_cmd`; the caller sets RUST_LOG.
serve_command() {
  serve_cmd=("$bin" serve --self-signed --self-signed-ca-file "$work/ca.crt"
    --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT"
    --shutdown-delay 0s --cluster-lookups off)
}
