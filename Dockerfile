# syntax=docker/dockerfile:1
# `oip-asgi serve` in a container: KServe (deploy/kserve/), or any container host. From the repository root:
#
#   docker build -t oip-asgi .
#   docker run --rm -p 8080:8080 -p 8081:8081 oip-asgi
#
# The image serves models:models from /srv/models.py, a copy of MODELS (by default the example models).
# Serve your own: --build-arg MODELS=path/to/yours.py (a path inside the build context), a `FROM oip-asgi`
# image that copies yours to /srv/models.py, or a module mounted at run time and named with --app-dir.
ARG PYTHON=3.12
FROM python:${PYTHON}-slim

# oip-asgi's extras: serve is the command itself, grpc its --grpc-port; add metrics (--metrics-port),
# bf16, ... as needed.
ARG EXTRAS=serve,grpc
ARG MODELS=examples/models.py
# Your models' own requirements (a pip requirements file in the build context), if any.
ARG REQUIREMENTS=

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY . /tmp/oip-asgi
RUN pip install "/tmp/oip-asgi[${EXTRAS}]" \
    && if [ -n "${REQUIREMENTS}" ]; then pip install --requirement "/tmp/oip-asgi/${REQUIREMENTS}"; fi \
    && cp "/tmp/oip-asgi/${MODELS}" /srv/models.py \
    && python -m compileall -q /srv/models.py \
    && rm -rf /tmp/oip-asgi \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin oip

WORKDIR /srv
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["oip-asgi"]
CMD ["serve", "models:models", "--host", "0.0.0.0", "--port", "8080", "--grpc-port", "8081"]
