#!/usr/bin/env bash
# docs/onnx.md's list of supported ops must be the importer's table (io/onnx/onnx_table.c), as
# `onnx_conformance --list-ops` prints it. Usage: check_onnx_docs.sh BUILD_DIR [--update]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
doc=$root/docs/onnx.md
list=$("$1/tests/onnx_conformance" --list-ops)
current=$(sed -n '/<!-- ops begin -->/,/<!-- ops end -->/p' "$doc" | sed '1d;$d')
if [ "$list" == "$current" ]; then
  echo "docs/onnx.md lists the importer's ops"
  exit 0
fi
if [ "${2:-}" == "--update" ]; then
  { sed -n '1,/<!-- ops begin -->/p' "$doc"; echo "$list"; sed -n '/<!-- ops end -->/,$p' "$doc"; } > "$doc.new"
  mv "$doc.new" "$doc"
  echo "docs/onnx.md updated"
  exit 0
fi
echo "docs/onnx.md's op list differs from the importer's table; run scripts/check_onnx_docs.sh build --update"
diff <(echo "$current") <(echo "$list") || true
exit 1
