#!/usr/bin/env bash
# Validates the deployment files offline: YAML style, the Kubernetes
# manifests (deploy/kubernetes/**, the load Job's among them) and every
# Helm rendering (both charts) against the Kubernetes 1.30 schemas
# (strict), `sluice proxy --check` on every ConfigMap,
# docker-compose.yml, the systemd unit, and the container image (built and
# checked). A step whose tool is missing is skipped with one line.
#
#   bash deploy/validate.sh             # with the tools already installed
#   bash deploy/validate.sh --install   # install what is missing first (CI)
#   bash deploy/validate.sh --no-image  # everything but the image build
#
# SLUICE=PATH names the binary for --check (default target/debug/sluice,
# under $CARGO_TARGET_DIR when set; built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
KUBERNETES_VALIDATE_VERSION=1.37.0
KUBERNETES=1.30.0

install=false
image=true
for arg in "$@"; do
  case "$arg" in
    --install) install=true ;;
    --no-image) image=false ;;
    *) echo "validate.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

export PATH="$PATH:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
have() { command -v "$1" >/dev/null; }
step() { echo "-- $* (at ${SECONDS}s)"; }
skip() { echo "skipped: $*"; }

if $install; then
  step "install"
  missing=()
  have yamllint || missing+=(yamllint)
  have podman || missing+=(podman)
  have docker-compose || missing+=(docker-compose)
  if ((${#missing[@]})); then
    if have apt-get && [[ $(id -u) == 0 ]]; then
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
        >/dev/null 2>&1 || echo "apt-get install ${missing[*]} failed"
    else
      echo "not installed (needs apt-get as root): ${missing[*]}"
    fi
  fi
  if ! have helm; then
    if have go; then
      go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >/dev/null 2>&1 || echo "go install helm failed"
    else
      echo "not installed (needs go): helm"
    fi
  fi
  if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check \
      "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >/dev/null 2>&1 \
      || echo "pip install kubernetes-validate failed"
  fi
fi

sluice="${SLUICE:-${CARGO_TARGET_DIR:-target}/debug/sluice}"
[[ -x "$sluice" ]] || cargo build --locked -p sluice
rendered="$(mktemp -d)"
trap 'rm -rf "$rendered"' EXIT
manifests=()
while IFS= read -r file; do manifests+=("$file"); done < <(find deploy/kubernetes -name '*.yaml' | sort)

step "yamllint"
if have yamllint; then
  yamllint --version
  # -c names the settings; -s (strict) fails on warnings too.
  yamllint -s -c .yamllint.yaml docker-compose.yml deploy examples
else
  skip "yamllint is not installed"
fi

step "Helm charts: lint and render each values file"
if have helm; then
  helm version --short
  # sluice (gateway, sidecar) and sluice-load (a distributed load test).
  for chart in deploy/helm/sluice deploy/helm/sluice-load; do
    for values in default "$chart"/ci/*-values.yaml; do
      args=(--kube-version "$KUBERNETES")
      [[ "$values" != default ]] && args+=(-f "$values")
      # The jwt variant's key set comes from a file, as a user would give it.
      [[ "$values" == *jwt* ]] && args+=(--set-file 'files.jwks\.json=examples/keys/jwks.json')
      helm lint --strict --quiet "$chart" "${args[@]}"
      out="$rendered/$(basename "$chart")-$(basename "$values" .yaml).yaml"
      helm template sluice "$chart" "${args[@]}" >"$out"
      echo "rendered $chart $values: $(grep -c '^kind:' "$out") resources"
    done
  done
else
  skip "helm is not installed"
fi

step "Kubernetes $KUBERNETES schemas, strict: deploy/kubernetes and every rendering"
# As a module: a pip-installed script may not be on PATH (pyenv shims).
if python3 -c 'import kubernetes_validate' 2>/dev/null; then
  python3 -m kubernetes_validate --version
  python3 -m kubernetes_validate -k "$KUBERNETES" --strict --quiet "${manifests[@]}" "$rendered"/*.yaml
  echo "valid: ${#manifests[@]} files in deploy/kubernetes, $(find "$rendered" -name '*.yaml' | wc -l) renderings"
else
  skip "kubernetes-validate is not installed"
fi

step "sluice proxy --check on every ConfigMap and the image's default configuration"
if python3 -c 'import yaml' 2>/dev/null; then
  python3 deploy/check-configs.py "$sluice" "${manifests[@]}" "$rendered"/*.yaml
else
  skip "PyYAML is not installed"
fi
# The spec is at /etc/sluice/specs in the image, in specs/ here.
SLUICE_SPEC=specs/petstore.yaml "$sluice" proxy -c deploy/rootfs/etc/sluice/sluice.yaml --check

step "docker-compose.yml"
if have docker-compose; then
  docker-compose -f docker-compose.yml config -q
  echo "docker-compose config: valid ($(docker-compose version --short))"
else
  skip "docker-compose is not installed"
fi

step "systemd unit"
if have systemd-analyze; then
  # verify wants the unit's commands to exist: a root holding the unit, the
  # binary, kill and the system's own units.
  root="$rendered/systemd-root"
  mkdir -p "$root/usr/local/bin" "$root/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
  cp "$sluice" "$root/usr/local/bin/sluice"
  cp "$(type -P kill)" "$root/bin/kill"
  cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
  cp deploy/systemd/sluice.service "$root/etc/systemd/system/"
  # It reports unknown keys and bad values as warnings and exits 0: any
  # output fails the step.
  said="$(systemd-analyze verify --root="$root" sluice.service 2>&1)" || true
  if [[ -n "$said" ]]; then
    echo "$said"
    exit 1
  fi
  echo "systemd-analyze verify: clean ($(systemd-analyze --version | head -1))"
  systemd-analyze security --offline=yes deploy/systemd/sluice.service 2>&1 | tail -1 || true
else
  skip "systemd-analyze is not installed"
fi

step "container image"
if ! $image; then
  skip "--no-image"
elif engine="$(bash deploy/container-engine.sh 2>/dev/null)"; then
  # An unoptimised static build: the release build's fat LTO takes several
  # minutes more, and the image's contents are the same.
  bash deploy/image.sh --profile dev --tag sluice:ci >/dev/null
  "$engine" --version
else
  skip "neither podman nor a docker engine is available"
fi

echo "deployment checks passed in ${SECONDS}s"
