#!/usr/bin/env python3
"""Runs `sluice proxy --check` on the sluice.yaml of every ConfigMap in the
given manifests (plain files or `helm template` output), as a pod would
read it.

    python3 deploy/check-configs.py SLUICE_BINARY MANIFEST...

Each ConfigMap's files are written to a directory standing in for
/etc/sluice (paths in the config are rewritten to it); an admin token
file mounted from a Secret elsewhere (`admin.token_file`) is a stand-in
token written there too. `--check` resolves
upstream host names, which name cluster Services here: the check runs in a
private mount namespace whose /etc/hosts maps every such name to 127.0.0.1
(`unshare`, root only; skipped with a line otherwise). Needs PyYAML.
"""

import ipaddress
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

MOUNT = "/etc/sluice/"
# Binds the hosts file over /etc/hosts, in this namespace only, then checks.
CHECK_IN_NAMESPACE = 'mount --bind "$1" /etc/hosts && exec "$2" proxy -c "$3" --check'


def config_maps(paths):
    for path in paths:
        for doc in yaml.safe_load_all(pathlib.Path(path).read_text()):
            if doc and doc.get("kind") == "ConfigMap" and "sluice.yaml" in doc.get("data", {}):
                yield f"{path}: ConfigMap {doc['metadata']['name']}", doc["data"]


def host_names(config):
    names = set()
    for upstream in (config.get("upstreams") or {}).values():
        for url in upstream.get("hosts", []):
            host = urllib.parse.urlsplit(url).hostname
            try:
                ipaddress.ip_address(host)
            except ValueError:
                names.add(host)
    return sorted(names)


def check(binary, name, data, scratch):
    directory = pathlib.Path(tempfile.mkdtemp(dir=scratch))
    data = dict(data)
    token_file = ((yaml.safe_load(data["sluice.yaml"]) or {}).get("admin") or {}).get("token_file")
    if token_file and not token_file.startswith(MOUNT):
        # The Secret's file, as the pod would see it; the token is a stand-in.
        data["sluice.yaml"] = data["sluice.yaml"].replace(token_file, f"{MOUNT}admin-token.stand-in")
        data["admin-token.stand-in"] = "stand-in-admin-token-0123456789abcdef\n"
    for file, content in data.items():
        (directory / file).write_text(content.replace(MOUNT, f"{directory}/"))
    names = host_names(yaml.safe_load(data["sluice.yaml"]))
    hosts = directory / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {n}\n" for n in names))
    config = directory / "sluice.yaml"
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", CHECK_IN_NAMESPACE, "sh"]
    result = subprocess.run(
        command + [str(hosts), binary, str(config)], capture_output=True, text=True, timeout=60
    )
    output = (result.stdout + result.stderr).strip().replace(str(directory), "/etc/sluice")
    print(("ok    " if result.returncode == 0 else "FAIL  ") + f"{name}: {output}")
    return result.returncode == 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, manifests = os.path.abspath(sys.argv[1]), sys.argv[2:]
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip  sluice proxy --check on the ConfigMaps: needs root and unshare for a private /etc/hosts")
        return
    with tempfile.TemporaryDirectory() as scratch:
        results = [check(binary, name, data, scratch) for name, data in config_maps(manifests)]
    if not results:
        sys.exit("check-configs: no ConfigMap with a sluice.yaml in " + " ".join(manifests))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
