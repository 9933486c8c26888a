#!/usr/bin/env bash
# Real public data the benchmarks read but the project cannot ship (see the benchmark that uses
# each). Idempotent; a file already in place with the right checksum is kept. Without npm, or
# offline, nothing is fetched and the benchmark prints that it skips the data set.
#
# flights-3m.parquet -- three million US domestic flights, January to June 2001, from the US
# Bureau of Transportation Statistics' on-time performance reports, as published in the npm
# package vega-datasets 3.2.1 (BSD-3-Clause; the data's own terms: collected under 14 CFR 234).
# forecast_bench turns it into hourly departure counts and delay minutes (benchmarks/forecast_flights.py).
set -euo pipefail

dest="${1:-.cache/bench-data}"
flights="$dest/flights-3m.parquet"
flights_sha256=dbeb920c90f59b6ccaff823dcc3d08f25a97fa1ce128d93f40be4e931f5900b0

if [ -f "$flights" ] && echo "$flights_sha256  $flights" | sha256sum --check --status; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-bench-data: npm not found; forecast_bench will skip the flight series" >&2
    exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack --silent vega-datasets@3.2.1 >/dev/null 2>&1); then
    echo "fetch-bench-data: npm pack vega-datasets@3.2.1 failed (offline?); forecast_bench will skip the flight series" >&2
    exit 0
fi
tar -xzf "$work"/vega-datasets-3.2.1.tgz -C "$work" package/data/flights-3m.parquet
if ! echo "$flights_sha256  $work/package/data/flights-3m.parquet" | sha256sum --check --status; then
    echo "fetch-bench-data: flights-3m.parquet from vega-datasets 3.2.1 has an unexpected checksum; not used" >&2
    exit 1
fi
mv "$work/package/data/flights-3m.parquet" "$flights"
echo "fetch-bench-data: $flights"
