#!/usr/bin/env bash
# Offline link check of the Markdown files (.ci/links.py): relative targets,
# heading anchors and line anchors, no network. Its one dependency,
# markdown-it-py (pinned), goes into a venv cached outside the repository;
# a fresh machine installs it in about 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci/links-venv
want="markdown-it-py==4.0.0"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$venv"; python3 -m venv "$venv"
  }
fi
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$want"
  echo "$want" > "$venv/.installed"
fi
exec "$venv/bin/python" .ci/links.py "$@"
