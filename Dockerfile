# The one mqstore image: the `mqstore` CLI and its three services (writer, indexer,
# notifier) and the kopf operator (`kopf run -m mqstore.operator.handlers`).
# The Helm chart (charts/mqstore) runs the operator from it and, by default, every Broker.
#
#   docker build -t mqstore/mqstore:0.1.0 .
#
# Any Debian-based image with python3.11 and its venv module can be the base: the e2e node
# builds this file with buildah over a debootstrapped Debian (e2e/build-images.sh):
#
#   buildah bud --isolation chroot --build-arg BASE_IMAGE=localhost/... -t ... .
#
# Runs as uid/gid 10001 with a read-only root filesystem: the services write only /data
# (the volume) and /tmp (an emptyDir); the operator writes nothing.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# .dockerignore lets in only pyproject.toml, README.md, the package folders and wheels/.
COPY . ./
# With a wheels/ folder in the context (the project and all its dependencies, as
# e2e/build-images.sh makes it) the install reaches no package index; without one pip
# builds the project here and fetches its dependencies.  Building the project compiles its
# C extension (storage/format/_records.c): gcc, libc6-dev and zlib's headers, and Python's
# headers where the base image lacks them (a Debian python3.11), are installed for it in
# this stage only; the final image takes just /opt/mqstore.
RUN python3 -m venv /opt/mqstore \
    && if [ -d wheels ]; then \
           /opt/mqstore/bin/pip install --no-compile --no-index --find-links wheels mqstore; \
       else \
           build_packages="gcc libc6-dev zlib1g-dev" \
           && include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
           && { [ -f "$include/Python.h" ] || build_packages="$build_packages python3-dev"; } \
           && apt-get update -q \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                  $build_packages \
           && /opt/mqstore/bin/pip install --no-compile .; \
       fi \
    && /opt/mqstore/bin/python -m compileall -q /opt/mqstore

FROM ${BASE_IMAGE}
COPY --from=build /opt/mqstore /opt/mqstore
RUN groupadd --gid 10001 mqstore \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin mqstore
ENV PATH=/opt/mqstore/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /
# No ENTRYPOINT: the chart and the operator give every container its command
# (`mqstore writer --config ...`, `kopf run ...`).
CMD ["mqstore", "--help"]
