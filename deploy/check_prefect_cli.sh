#!/usr/bin/env bash
# The everyday Prefect commands of deploy/README.md, run as written against a Prefect server started for the
# check (its own PREFECT_HOME and a free port on 127.0.0.1, stopped at the end): `prefect server start`,
# `prefect work-pool create`, `prefect deploy --all --prefect-file deploy/prefect.yaml`, `prefect deployment ls`,
# `prefect deployment run` and `prefect worker start`, which runs the nightly deployment's flow run; the check
# passes when every command exits 0 and the release appears under the releases root ($SDC_RELEASES_ROOT).
#
#   bash deploy/check_prefect_cli.sh          # from the repository root, with the package's environment active
#
# About a minute on 2 cores; too slow for the test suite, which drives the same path through Prefect's client
# (tests/test_scheduled.py).
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
server=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PREFECT_HOME="$work/prefect" PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_API_URL="http://127.0.0.1:$port/api"
export SDC_HOME="$PWD" SDC_RELEASES_ROOT="$work/releases"

step() { echo "\$ $*"; "$@"; echo "  -> exit $?"; }

echo "\$ prefect server start --host 127.0.0.1 --port $port   (in the background)"
prefect server start --host 127.0.0.1 --port "$port" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 120); do
    python -c "import urllib.request; urllib.request.urlopen('$PREFECT_API_URL/health', timeout=1)" 2>/dev/null && break
    sleep 1
done
echo "  -> server answers at $PREFECT_API_URL"

step prefect work-pool create sdc-process --type process
step prefect --no-prompt deploy --all --prefect-file deploy/prefect.yaml
step prefect deployment ls
step prefect deployment run release/census-rankswap-nightly
step prefect worker start --pool sdc-process --work-queue releases --run-once

manifest="$SDC_RELEASES_ROOT/census-rankswap/nightly/manifest.json"
test -f "$manifest" || { echo "FAILED: no release at $SDC_RELEASES_ROOT/census-rankswap/nightly"; exit 1; }
echo "release written: $(dirname "$manifest")"
echo "all Prefect commands exited 0"
