FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml ./
RUN pip install --no-cache-dir . 2>/dev/null || true
COPY . .
RUN pip install --no-cache-dir -e .
# Web, worker and beat run as an unprivileged user (numeric, so an orchestrator's
# "run as non-root" check can verify it). It owns only what the processes write:
# collectstatic's STATIC_ROOT (at the web's start) and var/ (email files, beat's schedule,
# its home); the code stays root's, read-only to the app.
RUN groupadd --system --gid 10001 fieldops \
 && useradd --system --uid 10001 --gid fieldops --home-dir /app/var --no-create-home --shell /usr/sbin/nologin fieldops \
 && mkdir -p /app/staticfiles /app/var \
 && chown fieldops:fieldops /app/staticfiles /app/var
USER 10001:10001
EXPOSE 8000
