#!/usr/bin/env bash
# The plugin's command: runs ../helm-post-renderer.sh from the checkout this
# directory is in (`helm plugin install DIR` links to DIR, and readlink -f
# follows the link back).
set -euo pipefail
exec bash "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../helm-post-renderer.sh"
