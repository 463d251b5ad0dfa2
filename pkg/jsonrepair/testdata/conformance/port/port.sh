#!/usr/bin/env bash
# Ports the test suites of josdejong/jsonrepair and mangiucugna/json_repair into
# ../cases.jsonl, with what each library answers for every case.
#
#   port.sh JSONREPAIR_CHECKOUT JSON_REPAIR_CHECKOUT
#
# jsonrepair's suite (src/index.test.ts) runs for real, bundled with esbuild against a
# stand-in for vitest and for jsonrepair itself that records every input, expectation
# and line. json_repair's suite (tests/test_*.py) is read with Python's ast: every
# `assert repair_json(LITERAL) == LITERAL` (and loads, _assert_object_repairs) whose
# options do not change the reading. Then npm's jsonrepair (the version pinned in
# scripts/install-mcp-servers) and the json_repair checkout answer every input.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
js="$(cd "$1" && pwd)" py="$(cd "$2" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

npm install --prefix "$work" --no-audit --no-fund --loglevel=error esbuild@0.28.2 jsonrepair@3.15.0 >&2
cp -r "$here/jsonrepair" "$work/js"
cp "$js/src/index.test.ts" "$work/js/"
"$work/node_modules/.bin/esbuild" "$work/js/run.ts" --bundle --platform=node --sourcemap=inline \
  --alias:vitest="$work/js/vitest.ts" --outfile="$work/js/run.js" --log-level=warning
node --enable-source-maps "$work/js/run.js" > "$work/js.jsonl"
(cd "$py" && python3 "$here/json_repair/port.py") > "$work/py.jsonl"
cat "$work/js.jsonl" "$work/py.jsonl" > "$work/all.jsonl"
(cd "$py/src" && python3 "$here/json_repair/outputs.py") < "$work/all.jsonl" > "$work/py_out.jsonl"
NODE_PATH="$work/node_modules" node "$here/../oracle.js" < "$work/all.jsonl" > "$work/js_out.jsonl"
(cd "$work" && python3 "$here/combine.py" "$(git -C "$js" rev-parse --short HEAD)" "$(git -C "$py" rev-parse --short HEAD)") > "$here/../cases.jsonl"
wc -l "$here/../cases.jsonl" >&2
