"""Cairn's side for `cairn bench --python`: warm compactions of a session file's text through the
wheel's `cairn.Host`, each into a fresh conversation (one warm-up first). Prints one JSON line."""

import json
import statistics
import sys
import time

import cairn

file, iterations, home = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(file, encoding="utf-8") as f:
    text = f.read()
host = cairn.Host(home=home)
samples = []
for i in range(iterations + 1):
    started = time.perf_counter()
    answer = host.compact(f"python-{i}", text)
    if not answer["committed"]:
        sys.exit(f"the wheel's compaction committed nothing: {answer.get('not_committed')}")
    if i > 0:  # the first warms caches
        samples.append((time.perf_counter() - started) * 1000)
print(json.dumps({"iterations": iterations, "p50_ms": statistics.median(samples)}))
