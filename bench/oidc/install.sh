#!/usr/bin/env bash
# Installs the OpenID Connect provider that sluice's oidc tests log in
# with (provider.mjs: panva's oidc-provider from the npm registry) under
# ~/.cache/sluice/oidc, keyed by the hash of package.json and provider.mjs,
# so a changed file reinstalls. Prints the provider script's path on its
# last line. Needs node (20 or later) and npm; a few seconds cold.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/oidc"
key=$(cat "$here/package.json" "$here/provider.mjs" | sha256sum | cut -c1-16)
script="$cache/provider.mjs"
if [[ -f "$script" && -d "$cache/node_modules/oidc-provider" && -f "$cache/source.sha" && "$(cat "$cache/source.sha")" == "$key" ]]; then
  echo "$script"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is not installed: cannot install the OIDC provider" >&2; exit 1; }
mkdir -p "$cache"
cp "$here/package.json" "$cache/package.json"
(cd "$cache" && npm install --no-audit --no-fund --loglevel=error >&2)
cp "$here/provider.mjs" "$script"
echo "$key" > "$cache/source.sha"
echo "$script"
