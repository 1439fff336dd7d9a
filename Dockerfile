# rwo-failover. The image runs reconcile.py; each manifest states its mode: cronjob.yaml passes --once,
# deployment.yaml sets INTERVAL for continuous mode.
#
# Both stages are Debian 13 (trixie) and Python 3.13: distroless python3-debian13 ships Debian's python3.13
# (/usr/bin/python3, 3.13.5 by distroless' own image test), so the wheels pip picks for CPython 3.13 in the
# first stage load in the second. (python3-debian12 is past distroless' support window and no longer built.)
# requirements.txt's hashes cover every wheel of each pin, cp313 for amd64 and arm64 included.
#
# Base images are pinned by tag AND digest; Renovate (renovate.json) proposes each new digest as a pull
# request. By hand (monthly, or on a CVE):
#   crane digest python:3.13-slim-trixie
#   crane digest gcr.io/distroless/python3-debian13:nonroot
# (or `docker buildx imagetools inspect IMAGE`), replace both digests below, rebuild, and run `make test`
# (the container smoke test runs this file's ENTRYPOINT). The two digests below were copied from public
# repositories that pin these tags, not resolved by whoever wrote them here, who could reach no container
# registry: confirm them with the commands above (a wrong digest fails the build; it cannot pull another
# image).

FROM python:3.13-slim-trixie@sha256:ffb752e139c0a19692a43af8d8523b274222dd68eebad5d583b45c2201c6e30a AS build
WORKDIR /build
COPY requirements.txt .
# Every dependency is pinned with hashes; --no-deps because the file already lists the full set.
RUN python -m pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
        --target /build/deps -r requirements.txt

# No shell and no package manager in the runtime image.
FROM gcr.io/distroless/python3-debian13:nonroot@sha256:4376456c1d8520c9d464f2c475465850efaecabf9a190ff24d4a0eef2b884bea
LABEL org.opencontainers.image.title="rwo-failover" \
      org.opencontainers.image.description="Releases ReadWriteOnce volumes held by pods on Kubernetes nodes that are proven down." \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/rwo-failover/rwo-failover" \
      org.opencontainers.image.base.name="gcr.io/distroless/python3-debian13:nonroot"
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
