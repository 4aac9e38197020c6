#!/usr/bin/env bash
# The official MCP conformance suite (server mode) against `signoff serve --transport http`.
#
# Installs Node 22 and @modelcontextprotocol/conformance into .tools/conformance (git-ignored) with
# npm on first use, starts signoff on a free loopback port with an explicit test identity (the suite
# sends no credentials; --fixed-identity is refused off loopback), runs the active suite and compares
# it with tests/conformance/baseline.yml (expected failures, each with its reason).
#
# Usage: tests/conformance/run.sh [extra conformance-cli args, e.g. --scenario ping]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=0.1.16
TOOLS=${SIGNOFF_CONFORMANCE_DIR:-$ROOT/.tools/conformance}
SIGNOFF=${SIGNOFF_BIN:-$ROOT/.venv/bin/signoff}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
MANIFESTS=${SIGNOFF_CONFORMANCE_MANIFESTS:-$ROOT/manifests}
NODE=$TOOLS/node_modules/.bin/node
SUITE=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js
PACKAGE=$TOOLS/node_modules/@modelcontextprotocol/conformance/package.json

installed_version() {
    [ -f "$PACKAGE" ] && "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$PACKAGE"
}

if [ ! -x "$NODE" ] || [ "$(installed_version || true)" != "$VERSION" ]; then
    command -v npm >/dev/null || { echo "conformance: npm is not installed" >&2; exit 3; }
    mkdir -p "$TOOLS"
    echo "conformance: installing node@22 and @modelcontextprotocol/conformance@$VERSION into $TOOLS" >&2
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
        node@22 "@modelcontextprotocol/conformance@$VERSION" >&2
fi

PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=$(mktemp)
KEEP_OUT=${SIGNOFF_CONFORMANCE_OUT:+yes}
OUT=${SIGNOFF_CONFORMANCE_OUT:-$(mktemp -d)}

SIGNOFF_PRINCIPAL=conformance SIGNOFF_TENANT=conformance SIGNOFF_ROLES=billing \
    "$SIGNOFF" serve --transport http --fixed-identity --host 127.0.0.1 --port "$PORT" \
    --database memory:// --manifests "$MANIFESTS" --no-reload --log-level warning >"$LOG" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -f "$LOG"; }
trap cleanup EXIT

URL=http://127.0.0.1:$PORT/mcp
for _ in $(seq 1 150); do
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "conformance: signoff exited before serving:" >&2; cat "$LOG" >&2; exit 2
    fi
    if "$PYTHON" -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()' "$PORT" 2>/dev/null; then
        break
    fi
    sleep 0.2
done

status=0
"$NODE" "$SUITE" server --url "$URL" --expected-failures "$HERE/baseline.yml" -o "$OUT" "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "conformance: failed (results in $OUT); server log:" >&2
    cat "$LOG" >&2
elif [ -z "$KEEP_OUT" ]; then
    rm -rf "$OUT"
fi
exit "$status"
