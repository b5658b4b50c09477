#!/usr/bin/env python3
"""Keeps each Deployment's checksum/config annotation equal to the sha256 of
the ConfigMaps its pods mount, so that a config change rolls the pods.

    python3 deploy/kubernetes/config-checksum.py           # check (exit 1 if stale)
    python3 deploy/kubernetes/config-checksum.py --write   # update the annotations

Looks at every YAML file under deploy/kubernetes. The checksum is the
sha256 of the mounted ConfigMaps' `data`, as JSON with sorted keys, in the
order of the pod's volumes. Needs PyYAML.
"""

import hashlib
import json
import pathlib
import re
import sys

import yaml

HERE = pathlib.Path(__file__).parent
ANNOTATION = "checksum/config"


def documents():
    for path in sorted(HERE.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path, doc


def main():
    write = "--write" in sys.argv[1:]
    docs = list(documents())
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for _, d in docs if d["kind"] == "ConfigMap"}
    stale = 0
    for path, doc in docs:
        if doc["kind"] != "Deployment":
            continue
        template = doc["spec"]["template"]
        mounted = [v["configMap"]["name"] for v in template["spec"].get("volumes", []) if "configMap" in v]
        data = [config_maps[name] for name in mounted]
        want = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        have = template["metadata"].get("annotations", {}).get(ANNOTATION)
        name = f"{path.relative_to(HERE)}: Deployment {doc['metadata']['name']}"
        if have == want:
            print(f"ok    {name}: {ANNOTATION} matches {', '.join(mounted)}")
            continue
        if write:
            text = path.read_text()
            pattern = re.compile(rf'({re.escape(ANNOTATION)}: )"[^"]*"')
            path.write_text(pattern.sub(rf'\g<1>"{want}"', text, count=1))
            print(f"wrote {name}: {ANNOTATION} {want}")
        else:
            stale += 1
            print(f"FAIL  {name}: {ANNOTATION} is {have}, the ConfigMaps hash to {want} (run with --write)")
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
