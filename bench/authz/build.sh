#!/usr/bin/env bash
# Builds the Envoy ext_authz gRPC server that sluice's ext_authz tests ask
# (main.go: go-control-plane's generated envoy.service.auth.v3 and
# grpc-go) and caches it as ~/.cache/sluice/authz/authz-grpc, keyed by the
# hash of its sources, so a changed source rebuilds. Prints the binary's
# path on its last line. Needs Go and the Go module proxy; about a minute cold.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/authz"
key=$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin="$cache/authz-grpc"
if [[ -x "$bin" && -f "$cache/source.sha" && "$(cat "$cache/source.sha")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: cannot build the ext_authz server" >&2; exit 1; }
mkdir -p "$cache"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" . >&2)
mv "$bin.tmp" "$bin"
echo "$key" > "$cache/source.sha"
echo "$bin"
