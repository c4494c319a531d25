# ledger-exporter container image.
# Stage 1 builds the project's wheel and installs it, with wheels of its runtime
# dependencies, into a venv. Stage 2 copies only that venv onto a clean base: the final
# image has no compiler, no build tooling, no wheels, no pip cache and no source tree.
# Works with the classic builder and BuildKit alike (no RUN --mount).
#
# REVISION and BRANCH say what was built; they become ledger_exporter_build_info's labels
# and `ledger-exporter --version`'s first line (the build context has no .git to ask):
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg BRANCH="$(git rev-parse --abbrev-ref HEAD)" -t ledger-exporter .
# Left out, both are empty (unknown), as the metric contract says. VERSION is the version
# the release workflow checked against exporter/__init__.py (the project's one version) and
# only labels the image; the package inside carries its own.
#
# The base is pinned by tag and digest (the tag says what it is, the digest what it is
# exactly); both stages use the same one so the venv's python symlink resolves.
ARG BASE=python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5
ARG REVISION=""
ARG BRANCH=""

FROM ${BASE} AS builder

ARG REVISION
ARG BRANCH
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY exporter/ exporter/
COPY ledger_simulator/ ledger_simulator/
# The release's recipe (tests/deploy/test_wheel.py builds the same way): `python -m build`
# makes the sdist and the wheel from it, so the image holds what PyPI gets. setup.py writes
# exporter/BUILD_INFO into the wheel from these variables. The venv has no pip of its own:
# the base image's pip installs into it from the wheels just built and downloaded, offline
# (--no-index), so only the wheel and its dependencies land there.
RUN python -m pip install --no-cache-dir "build==1.2.2.post1" \
    && LEDGER_EXPORTER_BUILD_REVISION="${REVISION}" LEDGER_EXPORTER_BUILD_BRANCH="${BRANCH}" \
       python -m build --outdir /dist . \
    && pip wheel --no-cache-dir --wheel-dir /wheels /dist/ledger_exporter-*.whl \
    && python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-index \
       --find-links=/wheels /wheels/ledger_exporter-*.whl

FROM ${BASE}

ARG VERSION=dev
ARG REVISION
LABEL org.opencontainers.image.title="ledger-exporter" \
      org.opencontainers.image.description="Prometheus exporter for the nodes of a permissioned peer-to-peer ledger network" \
      org.opencontainers.image.source="https://github.com/ledger-exporter/ledger-exporter" \
      org.opencontainers.image.url="https://github.com/ledger-exporter/ledger-exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.11-slim-bookworm"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:${PATH}"

# Fixed numeric ids, so Kubernetes' runAsUser/runAsNonRoot and volume permissions can
# rely on them; no home directory, no login shell. /var/lib/ledger-exporter, owned by that
# user, holds the state file (the memory between cycles, kept across restarts).
RUN groupadd --system --gid 65532 ledger \
    && useradd --system --no-log-init --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin ledger \
    && install -d -o 65532 -g 65532 -m 0700 /var/lib/ledger-exporter

# Same base image as the builder, so the venv's python symlink resolves here too.
COPY --from=builder /opt/venv /opt/venv
# The config the image ships: the repository's example, replaced by a mount in practice.
COPY config/example.yml /etc/ledger-exporter/config.yml

USER 65532:65532
EXPOSE 9877
# The state file's directory: a volume, so it stays writable with --read-only and a new
# container started on the same volume keeps the height clocks (docs/deployment.md, Container image).
VOLUME ["/var/lib/ledger-exporter"]

# No curl/wget in the image: the venv's Python probes the liveness endpoint itself
# (urlopen raises on a refused connection or a non-2xx answer, so the exit code is 1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9877/-/healthy', timeout=4)"]

ENTRYPOINT ["ledger-exporter"]
CMD ["--config.file=/etc/ledger-exporter/config.yml", "--state.file=/var/lib/ledger-exporter/state.json"]
