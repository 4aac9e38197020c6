#!/usr/bin/env bash
# The official MCP conformance suite (server mode) against `signoff serve --transport http`.
#
# Needs Node 22 and @modelcontextprotocol/conformance in .tools/conformance (git-ignored), installed
# by tests/conformance/install.sh (`make tools`, a step of `make test`); run by hand, this script
# runs that first (it prints what it downloads). Under pytest it never installs
# (SIGNOFF_CONFORMANCE_NO_INSTALL). Starts signoff on a free loopback port with an explicit test
# identity (the suite sends no credentials; --fixed-identity is refused off loopback), runs all
# scenarios (active and pending) and compares it with tests/conformance/baseline.yml (expected failures, each with
# its reason).
#
# Usage: tests/conformance/run.sh [extra conformance-cli args, e.g. --scenario ping]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TOOLS=${SIGNOFF_CONFORMANCE_DIR:-$ROOT/.tools/conformance}
SIGNOFF=${SIGNOFF_BIN:-$ROOT/.venv/bin/signoff}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
MANIFESTS=${SIGNOFF_CONFORMANCE_MANIFESTS:-$ROOT/src/signoff/demo/manifests}
NODE=$TOOLS/node_modules/.bin/node
SUITE=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js

if [ -z "${SIGNOFF_CONFORMANCE_NO_INSTALL:-}" ]; then
    "$HERE/install.sh" >&2
fi
if [ ! -x "$NODE" ] || [ ! -f "$TOOLS/.installed-$(cat "$HERE/VERSION")" ]; then
    echo "conformance: the suite is not installed; run tests/conformance/install.sh (make tools)" >&2
    exit 3
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
"$NODE" "$SUITE" server --url "$URL" --suite all --expected-failures "$HERE/baseline.yml" -o "$OUT" "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "conformance: failed (results in $OUT); server log:" >&2
    cat "$LOG" >&2
elif [ -z "$KEEP_OUT" ]; then
    rm -rf "$OUT"
fi
exit "$status"
