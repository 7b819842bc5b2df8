#!/usr/bin/env bash
# procs.sh measures, with one binary, what two cores give over one and
# what score costs over pass-through: it runs `streamer bench` with
# GOMAXPROCS=2 and GOMAXPROCS=1 in turns (2, 1, 1, 2, ...), so that the
# machine's drift affects both alike, and reports per pair and as medians:
# score / pass-through and score's process CPU per event minus
# pass-through's (both with two), and score's events/s with two over one.
#
#   internal/bench/procs.sh [-b BINARY] [-n PAIRS] [-- BENCH FLAGS]
#
# BINARY defaults to a build of this checkout; BENCH FLAGS to "--kernel
# linear --partitions 4 --events 300000 --rounds 2 --snapshot-every 0".
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="" pairs=6
while getopts "b:n:" o; do
  case $o in b) bin=$OPTARG ;; n) pairs=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--kernel linear --partitions 4 --events 300000 --rounds 2 --snapshot-every 0)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
  go build -o "$work/streamer" ./cmd/streamer
  bin=$work/streamer
fi
run() { GOMAXPROCS=$1 "$bin" bench "${flags[@]}" --json 2>/dev/null >"$work/p$1-$2.json"; }
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then run 2 "$i"; run 1 "$i"; else run 1 "$i"; run 2 "$i"; fi
  echo "pair $i of $pairs done" >&2
done
/usr/bin/env python3 - "$work" "$pairs" "${flags[*]}" <<'PY'
import json, statistics, sys
work, pairs, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(p, i):
    rep = json.load(open(f"{work}/p{p}-{i}.json"))
    by = {x["pipeline"]: x for x in rep["summary"]["pipelines"]}
    ratio = next(r["median"] for r in rep["summary"]["ratios"] if r["ratio"] == "score/passthrough")
    return by["score"]["median"], by["score"]["cpu_us_per_event"] - by["passthrough"]["cpu_us_per_event"], ratio
print(f"streamer bench {flags}")
print(f"{'pair':>4} {'score/pass':>10} {'CPU diff µs':>11} {'score, 2 cores':>14} {'1 core':>9} {'2/1':>5}")
rows = []
for i in range(1, pairs + 1):
    s2, diff, ratio = load(2, i)
    s1, _, _ = load(1, i)
    rows.append((ratio, diff, s2 / s1))
    print(f"{i:>4} {ratio:>10.2f} {diff:>11.2f} {s2:>14,.0f} {s1:>9,.0f} {s2 / s1:>5.2f}")
for k, name in enumerate(["score/pass-through", "score CPU - pass-through CPU, µs per event", "GOMAXPROCS 1 -> 2 on score"]):
    xs = sorted(r[k] for r in rows)
    print(f"{name}: median {statistics.median(xs):.2f} (range {xs[0]:.2f}-{xs[-1]:.2f})")
PY
