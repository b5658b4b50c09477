#!/usr/bin/env python3
"""Checks a sluice container image without running a container.

    python3 deploy/check-image.py IMAGE [--engine podman|docker]

From the image's configuration: the user is numeric and not root, the
entrypoint and default command, the exposed ports, the OCI labels. From the
image saved to a tar (`podman save` / `docker save`), its layers unpacked:
the binary is static and runs `--version`, which matches the version label;
there is no shell. Then, where chroot is allowed (root), the unpacked image
is started the way a runtime would (the image's environment, user 65532, the
root read-only, an /etc/hosts as a runtime writes one, no /dev, no /proc):
`proxy --check` on the default config, whose upstream is named only in
/etc/hosts (hickory-resolver reads it); `proxy --check` on a config whose
jwt handler fetches its key set from a jwks_url named only in /etc/hosts
(static glibc's getaddrinfo, without NSS modules); then the proxy itself,
until its admin listener answers /health (also to `sluice load`, through
a name only in /etc/hosts: getaddrinfo again), and it stops cleanly on
SIGTERM.
"""

import argparse
import functools
import http.server
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request

USER = "65532:65532"
ENTRYPOINT = ["/usr/local/bin/sluice"]
CMD = ["proxy", "-c", "/etc/sluice/sluice.yaml"]
PORTS = {"8000/tcp", "9901/tcp"}
LABELS = ["title", "version", "revision", "source", "licenses"]
UPSTREAM_NAME = "petstore.sluice-image-check"
# Names that only the image's /etc/hosts knows, for what resolves through
# glibc's getaddrinfo: a jwks_url, and `sluice load`'s target.
JWKS_NAME = "jwks.sluice-image-check"
ADMIN_NAME = "admin.sluice-image-check"
# Test data only: the demo key set, which the image must not hold.
DEMO_JWKS = pathlib.Path(__file__).resolve().parent.parent / "examples/keys"
# A configuration whose jwt handler fetches its keys at start (so --check
# fetches them): the URL's host is resolved by getaddrinfo.
JWKS_URL_CONFIG = """\
listeners: [{{ address: 127.0.0.1:0 }}]
upstreams: {{ app: {{ hosts: ["http://127.0.0.1:9"] }} }}
middleware: {{ jwt: {{ jwks_url: "http://{name}:{port}/jwks.json", algorithms: [RS256] }} }}
chains: {{ default: [jwt] }}
routes: [{{ path: /, chain: default, upstream: app }}]
"""

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(*args, **kwargs):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)


def detect_engine():
    here = pathlib.Path(__file__).parent
    found = subprocess.run(["bash", str(here / "container-engine.sh")], capture_output=True, text=True)
    if found.returncode != 0:
        sys.exit("check-image: " + found.stderr.strip())
    return found.stdout.strip()


def check_config(config):
    check(config.get("User") == USER, f"user is {USER} (non-root, numeric): {config.get('User')!r}")
    check(config.get("Entrypoint") == ENTRYPOINT, f"entrypoint {ENTRYPOINT}: {config.get('Entrypoint')}")
    check(config.get("Cmd") == CMD, f"command {CMD}: {config.get('Cmd')}")
    ports = set(config.get("ExposedPorts") or {})
    check(ports == PORTS, f"exposed ports {sorted(PORTS)}: {sorted(ports)}")
    labels = config.get("Labels") or {}
    for name in LABELS:
        key = "org.opencontainers.image." + name
        check(bool(labels.get(key)), f"label {key}={labels.get(key)!r}")
    return labels.get("org.opencontainers.image.version")


def unpack(engine, image, into):
    """Saves the image to a tar and unpacks its layers, in order, into `into`."""
    saved = into.parent / "image.tar"
    run(engine, "save", "-o", str(saved), image)
    with tarfile.open(saved) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        layers = manifest[0]["Layers"]
        for layer in layers:
            with tarfile.open(fileobj=archive.extractfile(layer)) as files:
                files.extractall(into, filter="tar")
    print(f"      saved image: {saved.stat().st_size // 1024} KiB, {len(layers)} layers")


def check_rootfs(rootfs, version):
    binary = rootfs / "usr/local/bin/sluice"
    check(binary.is_file(), "/usr/local/bin/sluice is in the image")
    if not binary.is_file():
        return
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    static = "statically linked" in ldd.stdout + ldd.stderr or "not a dynamic" in ldd.stdout + ldd.stderr
    check(static, "the binary is static (no shared libraries)")
    shown = run(str(binary), "--version").stdout.strip()
    check(shown == f"sluice {version}", f"extracted binary --version: {shown!r} (label {version!r})")
    check(not (rootfs / "bin/sh").exists(), "no shell in the image")
    trusted = [str(p.relative_to(rootfs)) for p in rootfs.rglob("*.json") if '"keys"' in p.read_text(errors="replace")]
    check(not trusted, f"no JWKS in the image (a default that trusts a key set): {trusted}")
    files = sorted(str(p.relative_to(rootfs)) for p in rootfs.rglob("*") if p.is_file())
    print(f"      files: {', '.join(files)}")


def image_env(config):
    env = dict(item.split("=", 1) for item in config.get("Env") or [])
    # The example config's upstream, under a name only /etc/hosts knows; and
    # port 0 so that the check binds nothing fixed.
    env.update(
        PETSTORE_URL=f"http://{UPSTREAM_NAME}:8080",
        SLUICE_LISTEN="127.0.0.1:0",
        SLUICE_ADMIN="127.0.0.1:0",
    )
    return env


def check_started(rootfs, config):
    chroot_path = shutil.which("chroot")
    if os.geteuid() != 0 or not chroot_path:
        print("skip  starting the unpacked image: needs root for chroot and a read-only bind mount")
        return
    names = " ".join([UPSTREAM_NAME, JWKS_NAME, ADMIN_NAME])
    (rootfs / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.0.1 {names}\n")
    jwks_server = serve_demo_jwks()
    (rootfs / "check").mkdir()
    jwks_url_config = JWKS_URL_CONFIG.format(name=JWKS_NAME, port=jwks_server.server_address[1])
    (rootfs / "check/jwks-url.yaml").write_text(jwks_url_config)
    # The root read-only, as with readOnlyRootFilesystem.
    subprocess.run(["mount", "--bind", str(rootfs), str(rootfs)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(rootfs)], check=True)
        chroot = [chroot_path, f"--userspec={USER}", str(rootfs)]
        env = image_env(config)
        checked = subprocess.run(
            chroot + ENTRYPOINT + CMD + ["--check"], env=env, capture_output=True, text=True, timeout=30
        )
        check(
            checked.returncode == 0,
            f"proxy --check on the image's config as {USER}, upstream from /etc/hosts: "
            + (checked.stdout + checked.stderr).strip(),
        )
        checked = subprocess.run(
            chroot + ENTRYPOINT + ["proxy", "-c", "/check/jwks-url.yaml", "--check"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        check(
            checked.returncode == 0,
            f"proxy --check with a jwks_url named in /etc/hosts only (getaddrinfo, no NSS module): "
            + (checked.stdout + checked.stderr).strip(),
        )
        serve(chroot, env)
    finally:
        jwks_server.shutdown()
        subprocess.run(["umount", str(rootfs)], check=True)


def serve_demo_jwks():
    """Serves examples/keys/jwks.json on 127.0.0.1 (the chroot shares the network)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(DEMO_JWKS)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def serve(chroot, env):
    """Starts the proxy in the image root until /health answers, then stops it."""
    proxy = subprocess.Popen(chroot + ENTRYPOINT + CMD, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proxy.stdout.readline()
        admin = line.rsplit("admin ", 1)[-1].strip() if "admin http://" in line else None
        check(admin is not None, f"the proxy started in the image root: {line.strip()!r}")
        if admin:
            with urllib.request.urlopen(admin + "/health", timeout=5) as answer:
                body = answer.read().decode()
            check(answer.status == 200, f"GET {admin}/health: {answer.status} {body}")
            by_name = admin.replace("127.0.0.1", ADMIN_NAME) + "/health"
            # The name is resolved by getaddrinfo; the request says
            # `Host: localhost`, since the admin listener answers IP
            # literals, localhost and admin.hosts only (DNS rebinding).
            loaded = subprocess.run(
                chroot + ENTRYPOINT + ["load", "-c1", "-n1", "-q", "-H", "Host: localhost", by_name],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            said = (loaded.stdout + loaded.stderr).strip()
            check(
                loaded.returncode == 0 and "1 requests" in said,
                f"sluice load {by_name} (getaddrinfo, /etc/hosts): exit {loaded.returncode}, "
                + (said.splitlines() or [""])[0],
            )
        proxy.send_signal(signal.SIGTERM)
        code = proxy.wait(timeout=20)
        check(code == 0, f"SIGTERM: exit status {code}")
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
        stderr = proxy.stderr.read()
        if failures and stderr:
            print(stderr, file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image")
    parser.add_argument("--engine", choices=["podman", "docker"])
    args = parser.parse_args()
    engine = args.engine or detect_engine()
    config = json.loads(run(engine, "image", "inspect", args.image).stdout)[0]["Config"]
    print(f"checking image {args.image} with {engine}")
    version = check_config(config)
    with tempfile.TemporaryDirectory() as scratch:
        rootfs = pathlib.Path(scratch) / "rootfs"
        rootfs.mkdir()
        unpack(engine, args.image, rootfs)
        check_rootfs(rootfs, version)
        check_started(rootfs, config)
    print(f"{len(failures)} failed" if failures else "image check passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
