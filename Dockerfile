# infermeter (and, with the `worker` extra, the reference worker): one image for both services
# of docker-compose.yml. EXTRAS picks the optional dependencies of pyproject.toml.
FROM python:3.11-slim

ARG EXTRAS=""
# pip reads these from the environment: set them for a private mirror or a CPU-only torch index.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY store store
COPY promql promql
COPY collector collector
COPY cost cost
COPY alerts alerts
COPY forecast forecast
COPY dashboard dashboard
COPY reports reports
COPY worker worker
COPY infermeter infermeter
COPY remote remote
COPY ha ha
COPY access access
COPY moe moe
COPY drift drift
COPY releases releases
COPY migrations migrations
RUN pip install ".${EXTRAS:+[$EXTRAS]}"

# Run unprivileged; ./data (SQLite default, worker weights) belongs to that user.
RUN useradd --system --uid 10001 --home-dir /app infermeter \
    && mkdir -p /app/data/models \
    && chown -R infermeter /app/data
USER infermeter

EXPOSE 8000 8080
CMD ["infermeter", "up", "--host", "0.0.0.0"]
