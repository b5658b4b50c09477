#!/usr/bin/env bash
# Prints the container engine to use, podman or docker (a docker client
# with no engine behind it does not count), or exits 3 when there is none.
if command -v podman >/dev/null && podman info >/dev/null 2>&1; then
  echo podman
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo docker
else
  echo "neither podman nor a running docker engine is available" >&2
  exit 3
fi
