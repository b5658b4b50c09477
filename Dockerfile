# sluice container image: a static binary on scratch, running as a non-root
# user, fit for a read-only root filesystem. docs/DEPLOY.md has the commands.
#
#   docker build -t sluice:dev --build-arg VERSION=0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" --build-arg SOURCE=URL .
#
# Offline (no registry), deploy/image.sh builds the same runtime stage from a
# binary built on the host: it passes --build-arg BINARY=prebuilt and a
# context holding that binary, so the Rust stage is never built or pulled.
# Needs BuildKit or buildah (podman), which build only the stages the
# target uses: the legacy builder (DOCKER_BUILDKIT=0) builds every stage,
# and `prebuilt` fails there, since the repository has no ./sluice.

ARG BINARY=build

# The Rust builder. The binary is static (glibc, crt-static): the runtime
# stage has no shared libraries. Upstream names are resolved by
# hickory-resolver, without NSS; what still calls getaddrinfo (a jwt
# handler's jwks_url, `sluice load`) gets static glibc's built-in files
# and dns lookups, so no NSS module is needed either (docs/DEPLOY.md,
# "Name resolution"). getrandom is told to use the system call, not
# /dev/urandom; debug info is left out. deploy/image.sh uses the same flags.
FROM docker.io/library/rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN target="$(uname -m)-unknown-linux-gnu" \
 && RUSTFLAGS='-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"' \
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=debuginfo \
    cargo build --release --locked -p sluice --target "$target" \
 && cp "target/$target/release/sluice" /sluice

# deploy/image.sh's context: the binary it built, at the context's root.
FROM scratch AS prebuilt
COPY sluice /sluice

FROM ${BINARY} AS binary

FROM scratch AS runtime
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="sluice" \
      org.opencontainers.image.description="Sidecar HTTP proxy, API gateway and load balancer" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
# /etc/passwd and /etc/group name the non-root user 65532 (as distroless's
# "nonroot"); the numeric USER lets Kubernetes check runAsNonRoot.
# /etc/sluice/sluice.yaml, the default configuration, is the petstore
# example without its jwt handler: the example's key set has its private
# key in the repository, so the image trusts no key set. Mount your own
# configuration over /etc/sluice (a ConfigMap, a volume).
COPY deploy/rootfs/ /
COPY specs/petstore.yaml /etc/sluice/specs/petstore.yaml
COPY --from=binary /sluice /usr/local/bin/sluice
ENV PATH=/usr/local/bin \
    SLUICE_LISTEN=0.0.0.0:8000 \
    SLUICE_ADMIN=0.0.0.0:9901 \
    SLUICE_SPEC=/etc/sluice/specs/petstore.yaml
USER 65532:65532
# 8000: the example's listener; 9901: the admin listener (/health, /ready,
# /metrics, /config).
EXPOSE 8000/tcp 9901/tcp
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["proxy", "-c", "/etc/sluice/sluice.yaml"]
