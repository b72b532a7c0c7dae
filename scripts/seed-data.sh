#!/usr/bin/env bash
# Make a data directory of N handles (TEST/0 .. TEST/N-1, a URL and an EMAIL
# value each, imported in random order) unless it already exists.
#
#   scripts/seed-data.sh HANDLED_BINARY DATA_DIR N
set -euo pipefail
bin=$1 dir=$2 n=$3
[ -f "$dir/handles.redb" ] && exit 0
python3 - "$n" > "$dir.jsonl" <<'PY'
import sys, random
n = int(sys.argv[1]); ids = list(range(n)); random.seed(1); random.shuffle(ids)
for i in ids:
    print('{"handle":"TEST/%d","values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://example.org/objects/%d"}},{"index":2,"type":"EMAIL","data":{"format":"string","value":"owner%d@example.org"}}]}' % (i, i, i % 977))
PY
"$bin" import "$dir.jsonl" --data-dir "$dir" >&2
rm -f "$dir.jsonl"
