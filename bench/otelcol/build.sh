#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that sluice's tracing tests export to
# (manifest.yaml: OTLP receiver, batch processor, file exporter) with the
# collector builder, and caches it as ~/.cache/sluice/otelcol/otelcol-sluice.
# The cache is keyed by the manifest's hash, so a changed manifest rebuilds.
# Prints the binary's path on its last line. Needs Go; about 2 minutes cold.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
builder_version=v0.165.0
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/otelcol"
key=$(sha256sum "$here/manifest.yaml" | cut -c1-16)
bin="$cache/otelcol-sluice"
if [[ -x "$bin" && -f "$cache/manifest.sha" && "$(cat "$cache/manifest.sha")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: cannot build the collector" >&2; exit 1; }
mkdir -p "$cache"
gobin="$cache/gobin"
builder="$gobin/builder"
if [[ ! -x "$builder" ]]; then
  GOBIN="$gobin" go install "go.opentelemetry.io/collector/cmd/builder@$builder_version" >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/manifest.yaml" "$work/"
# The builder writes the sources and go.mod; its own `go mod tidy` wants
# the test dependencies of every component too, and one of the file
# exporter's (otlpencodingextension) may not be downloadable from the
# module proxy: `tidy -e` carries on past it, and `go build` needs only
# what the collector imports.
# The builder's failing tidy comes after go.mod is written: carry on then.
(cd "$work" && "$builder" --config manifest.yaml --skip-compilation >&2) \
  || [[ -f "$work/otelcol-sluice/go.mod" ]] \
  || { echo "the collector builder wrote no go.mod" >&2; exit 1; }
(cd "$work/otelcol-sluice" && go mod tidy -e >&2 && CGO_ENABLED=0 go build -trimpath -o otelcol-sluice . >&2)
cp "$work/otelcol-sluice/otelcol-sluice" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$key" > "$cache/manifest.sha"
echo "$bin"
