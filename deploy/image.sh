#!/usr/bin/env bash
# Builds the sluice container image offline: a static binary built here,
# put on scratch by the Dockerfile's runtime stage (the same stage a
# registry-connected `docker build .` ends in), with podman or docker,
# whichever works. Prints the image id on stdout; progress goes to stderr.
#
#   bash deploy/image.sh                      # release build (fat LTO: minutes)
#   bash deploy/image.sh --profile dev        # a quick unoptimised build (CI)
#   bash deploy/image.sh --binary PATH        # package a static binary built before
#   bash deploy/image.sh --tag sluice:test
#
# Then deploy/check-image.py checks what is in it (a failed check fails the
# script). Exit status 3: neither podman nor a docker engine is usable.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
binary=
tag=
while (($#)); do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

engine="$(bash deploy/container-engine.sh)" || exit 3

# The static build: glibc with crt-static (the toolchain's own target, so it
# needs nothing from outside). --target keeps RUSTFLAGS off build scripts
# and proc macros. Upstream names go through hickory-resolver; the rest
# (jwks_url, `sluice load`) through static glibc, whose files and dns
# lookups need no NSS module. getrandom would look for the system call
# through dlsym (which a static binary cannot do) and fall back to
# /dev/urandom, so it is told to call it directly.
if [[ -z "$binary" ]]; then
  target="$(uname -m)-unknown-linux-gnu"
  # No debug info: the image gets the code (symbols stay for backtraces).
  profile_env="CARGO_PROFILE_$(tr 'a-z-' 'A-Z_' <<<"$profile")"
  echo "== static build: cargo build --profile $profile --target $target" >&2
  env RUSTFLAGS='-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"' \
    "${profile_env}_DEBUG=false" "${profile_env}_STRIP=debuginfo" \
    cargo build --locked -p sluice --profile "$profile" --target "$target" >&2
  dir="$profile"
  [[ "$profile" == dev ]] && dir=debug
  binary="${CARGO_TARGET_DIR:-target}/$target/$dir/sluice"
fi

if ! ldd "$binary" 2>&1 | grep -Eq 'statically linked|not a dynamic executable'; then
  echo "image.sh: $binary is dynamically linked; a scratch image needs a static binary" >&2
  ldd "$binary" >&2 || true
  exit 1
fi
version="$("$binary" --version | awk '{print $2}')"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
source_url="$(git remote get-url origin 2>/dev/null || echo unknown)"
tag="${tag:-sluice:$version}"

# The context holds only what the runtime stage copies, at the same paths
# as in the repository, and the binary at its root.
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/specs" "$context/deploy"
cp Dockerfile "$context/"
cp -r deploy/rootfs "$context/deploy/"
cp specs/petstore.yaml "$context/specs/"
cp "$binary" "$context/sluice"

echo "== $engine build $tag (version $version, revision $revision)" >&2
# --no-cache: podman 4.3 (buildah) reuses a cached LABEL step whose build
# arguments changed, so the image kept the revision of an earlier build;
# the stage is a few COPYs, nothing worth caching.
"$engine" build --no-cache --target runtime --build-arg BINARY=prebuilt \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --build-arg SOURCE="$source_url" \
  --iidfile "$context/iid" -t "$tag" -f "$context/Dockerfile" "$context" >&2
labelled="$("$engine" image inspect --format '{{ index .Config.Labels "org.opencontainers.image.revision" }}' "$tag")"
if [[ "$labelled" != "$revision" ]]; then
  echo "image.sh: $tag is labelled revision $labelled, not $revision" >&2
  exit 1
fi
python3 deploy/check-image.py --engine "$engine" "$tag" >&2
cat "$context/iid"
echo
