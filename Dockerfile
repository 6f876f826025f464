# syntax=docker/dockerfile:1
# OpenKB image: one distribution, three roles (docs/deployment.md).
#   docker run IMAGE serve --host 0.0.0.0     the API, MCP, Dify endpoint and web UI
#   docker run IMAGE worker                   the huey consumer (needs REDIS_URL)
#   docker run IMAGE migrate                  one-shot schema upgrade
# The web UI is package data (server/web/dist, committed and rebuilt by CI), so no Node stage.

ARG PYTHON_VERSION=3.12

# --- build: a wheel and its dependencies in a virtualenv -----------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/openkb
ENV PATH=/opt/openkb/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY openkb ./openkb
COPY cli ./cli
COPY server ./server
COPY workers ./workers
COPY migrations ./migrations
RUN test -f server/web/dist/index.html \
 && pip install --upgrade pip \
 && pip install .

# --- runtime: the virtualenv only, a non-root user ------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
ARG OPENKB_UID=10001
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid ${OPENKB_UID} openkb \
 && useradd --system --uid ${OPENKB_UID} --gid openkb --home-dir /var/lib/openkb --create-home openkb
COPY --from=build /opt/openkb /opt/openkb
ENV PATH=/opt/openkb/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    OPENKB_HOME=/var/lib/openkb \
    OPENKB_ENV=production \
    OPENKB_PORT=8000
USER openkb
WORKDIR /var/lib/openkb
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=5 \
  CMD python -c "import os,urllib.request,sys; u='http://127.0.0.1:%s/readyz' % os.environ.get('OPENKB_PORT','8000'); sys.exit(0 if urllib.request.urlopen(u, timeout=4).status == 200 else 1)"
ENTRYPOINT ["tini", "--", "openkb"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
