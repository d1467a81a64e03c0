#!/usr/bin/env bash
# seed-corpus.sh DIR: writes every vector of shared/conformance/wire-golden.jsonl
# into DIR as binary files, the seed corpus of lmcc-fuzz-decode:
#   NNN-msgpack    the vector's msgpack frame (accepted and refused ones alike)
#   NNN-canonical  its canonical re-encoding, when the vector has one
#   NNN-json       its JSON form as a JSON frame (first byte `{`), when it has one
# Usage: tests/fuzz/seed-corpus.sh build-fuzz/corpus [path/to/wire-golden.jsonl]
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [wire-golden.jsonl]" >&2
  exit 2
fi
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
golden=${2:-$here/../../../shared/conformance/wire-golden.jsonl}
mkdir -p "$dir"

/usr/bin/python3 - "$dir" "$golden" <<'PY'
import json, os, sys

out_dir, golden = sys.argv[1], sys.argv[2]
count = 0
with open(golden, encoding="utf-8") as f:
    for index, line in enumerate(f):
        if not line.strip():
            continue
        vec = json.loads(line)
        frames = {}
        if "msgpack" in vec:
            frames["msgpack"] = bytes.fromhex(vec["msgpack"])
        if "canonical" in vec:
            frames["canonical"] = bytes.fromhex(vec["canonical"])
        if "json" in vec:
            frames["json"] = json.dumps(vec["json"], separators=(",", ":")).encode()
        for kind, data in frames.items():
            with open(os.path.join(out_dir, f"{index:03d}-{kind}"), "wb") as out:
                out.write(data)
            count += 1
print(f"seed-corpus: wrote {count} frames from {golden} into {out_dir}")
PY
