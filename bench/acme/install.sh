#!/usr/bin/env bash
# Installs Let's Encrypt's ACME test server, Pebble, and its DNS/challenge
# companion pebble-challtestsrv (the test resolves the certificate's names
# to 127.0.0.1 with it) under ~/.cache/sluice/pebble, for sluice's ACME
# tests. Prints the directory on its last line. Needs Go and the Go module
# proxy; about half a minute cold.
set -euo pipefail
version=v2.10.3
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/pebble"
if [[ -x "$cache/pebble" && -x "$cache/pebble-challtestsrv" && "$(cat "$cache/version" 2>/dev/null)" == "$version" ]]; then
  echo "$cache"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: cannot build Pebble" >&2; exit 1; }
mkdir -p "$cache"
GOBIN="$cache" CGO_ENABLED=0 go install "github.com/letsencrypt/pebble/v2/cmd/pebble@$version" \
  "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@$version" >&2
echo "$version" > "$cache/version"
echo "$cache"
