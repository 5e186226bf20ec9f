# The image of all three Caldera processes: `caldera controllers`, `caldera scheduler` and
# `caldera webhook` (the chart passes the subcommand as the first argument).
#
#   docker build -t caldera:dev .
#   docker run --rm caldera:dev --help
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Installs come only from the hashed locks (docs/reliability.md, "Supply chain"): the installers,
# then the runtime dependencies, then Caldera without build isolation or dependency resolution.
COPY requirements/build.lock requirements/runtime.lock ./requirements/
RUN pip install --require-hashes -r requirements/build.lock \
    && pip install --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY caldera ./caldera
COPY cli ./cli
COPY informers ./informers
COPY controllers ./controllers
COPY webhooks ./webhooks
COPY scheduler ./scheduler
COPY simulator ./simulator
# Byte-compiled at install time, so a read-only root filesystem costs nothing at start.
RUN pip install --no-deps --no-build-isolation --compile . \
    && cd / && rm -rf /src \
    && groupadd --system --gid 10001 caldera \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin caldera

WORKDIR /
USER 10001:10001
ENTRYPOINT ["caldera"]
CMD ["--help"]
