#!/usr/bin/env bash
# The benchmarks (make bench / make bench-quick). Each script creates and drops its own
# PostgreSQL database and uses Redis database 12 with its own queue names; every figure is
# printed and appended to artifacts/bench/results.jsonl (one JSON line per figure).
# A missed target is reported, not an error; a benchmark that cannot run is an error.
set -uo pipefail
cd "$(dirname "$0")/.."

quick=""
if [ "${1:-}" = "--quick" ]; then quick="--quick"; fi
PY="${PYTHON:-python}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export FIELDOPS_LOG_LEVEL=WARNING
results=artifacts/bench/results.jsonl
mkdir -p artifacts/bench
touch "$results"
first_line=$(($(wc -l < "$results") + 1))

"$PY" - <<'PY' || exit 1
import os, sys
import psycopg, redis
from urllib.parse import urlparse
pg = urlparse(os.environ.get("FIELDOPS_BENCH_PG", "postgres://postgres@127.0.0.1:5432"))
try:
    psycopg.connect(host=pg.hostname, port=pg.port or 5432, user=pg.username or "postgres",
                    dbname="postgres", connect_timeout=3).close()
    redis.Redis.from_url(os.environ.get("FIELDOPS_BENCH_REDIS_URL",
                                        "redis://127.0.0.1:6379/12"), socket_timeout=3).ping()
except Exception as exc:
    print(f"the benchmarks need PostgreSQL and Redis on 127.0.0.1: {exc}", file=sys.stderr)
    sys.exit(1)
PY

started=$(date +%s)
echo "FieldOps benchmarks ${quick:-(full)} on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=()
for bench in authority_throughput end_to_end replay_speed console_scale waiting_costs worker_memory bulk_operations; do
  t0=$(date +%s)
  if ! "$PY" "bench/$bench.py" $quick; then
    failed+=("$bench")
    echo "!! $bench did not complete"
  fi
  echo "   ($bench: $(( $(date +%s) - t0 )) s)"
done

echo
echo "== summary (this run: artifacts/bench/results.jsonl from line $first_line)"
tail -n +"$first_line" "$results" | "$PY" bench/summary.py
echo "total: $(( $(date +%s) - started )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "benchmarks that did not complete: ${failed[*]}" >&2
  exit 1
fi
