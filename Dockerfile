# The one mqstore image: the `mqstore` CLI and its three services (writer, indexer,
# notifier) and the kopf operator (`kopf run -m mqstore.operator.handlers`).
# The Helm chart (charts/mqstore) runs the operator from it and, by default, every Broker.
#
#   docker build -t mqstore/mqstore:0.1.0 .
#
# Runs as uid/gid 10001 with a read-only root filesystem: the services write only /data
# (the volume) and /tmp (an emptyDir); the operator writes nothing.

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# .dockerignore lets in only pyproject.toml, README.md and the package folders.
COPY . ./
RUN python -m venv /opt/mqstore \
    && /opt/mqstore/bin/pip install --no-compile . \
    && /opt/mqstore/bin/python -m compileall -q /opt/mqstore

FROM python:3.11-slim-bookworm
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
