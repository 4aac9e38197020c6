#!/usr/bin/env bash
# Install the MCP conformance suite (Node 22 and @modelcontextprotocol/conformance, pinned) into
# .tools/conformance (git-ignored), saying what it downloads. Nothing to do when it is there.
#
# `make tools` (a step of `make test`) runs this, so the test run itself never downloads anything;
# tests/surfaces/test_conformance.py skips, saying so, when the suite is not installed.
# Without npm it says so and exits 0: the conformance test then skips.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=$(cat "$HERE/VERSION")
TOOLS=${SIGNOFF_CONFORMANCE_DIR:-$ROOT/.tools/conformance}
STAMP=$TOOLS/.installed-$VERSION

if [ -f "$STAMP" ] && [ -x "$TOOLS/node_modules/.bin/node" ]; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    echo "tools: npm is not installed; the MCP conformance test will be skipped" >&2
    exit 0
fi
mkdir -p "$TOOLS"
echo "tools: downloading node@22 and @modelcontextprotocol/conformance@$VERSION with npm into $TOOLS"
npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
    node@22 "@modelcontextprotocol/conformance@$VERSION"
touch "$STAMP"
echo "tools: installed the MCP conformance suite $VERSION"
