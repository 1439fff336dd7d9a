# rwo-failover. The image runs reconcile.py; each manifest states its mode: cronjob.yaml passes --once,
# deployment.yaml sets INTERVAL for continuous mode.
#
# Base images are pinned by tag AND digest. To refresh them (monthly, or on a CVE):
#   crane digest python:3.11-slim-bookworm
#   crane digest gcr.io/distroless/python3-debian12:nonroot
# (or `docker buildx imagetools inspect IMAGE`), replace both digests below, rebuild,
# and run `make test` (the container smoke test runs this file's ENTRYPOINT).
# Keep both stages on Debian 12 and Python 3.11: distroless python3-debian12 ships
# python3.11, so the wheels built for CPython 3.11 in the first stage load in the second.

FROM python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b AS build
WORKDIR /build
COPY requirements.txt .
# Every dependency is pinned with hashes; --no-deps because the file already lists the full set.
RUN python -m pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
        --target /build/deps -r requirements.txt

# No shell and no package manager in the runtime image.
FROM gcr.io/distroless/python3-debian12:nonroot@sha256:7d1042ce588ab97019fe95c24ffca7bc5a82ccdac572511d5e09bda4435c89c5
LABEL org.opencontainers.image.title="rwo-failover" \
      org.opencontainers.image.description="Releases ReadWriteOnce volumes held by pods on Kubernetes nodes that are proven down." \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/rwo-failover/rwo-failover" \
      org.opencontainers.image.base.name="gcr.io/distroless/python3-debian12:nonroot"
WORKDIR /app
COPY --from=build /build/deps /app/deps
COPY reconcile.py /app/
COPY rwo_failover/ /app/rwo_failover/
ENV PYTHONPATH=/app/deps \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# 65532 is distroless's "nonroot"; numeric so runAsNonRoot can verify it.
USER 65532:65532
# checkov:skip=CKV_DOCKER_2: Kubernetes ignores HEALTHCHECK; a CronJob pass is judged by its exit code.
ENTRYPOINT ["/usr/bin/python3", "reconcile.py"]
