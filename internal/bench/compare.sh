#!/usr/bin/env bash
# compare.sh measures `streamer bench` of this checkout against an earlier
# commit's binary on the same machine in one run: the two binaries take
# turns (old, new, new, old, ...), so that the machine's drift affects both
# alike, and the script reports each one's median score events/s and the
# ratio new/old of every pair of turns.
#
#   internal/bench/compare.sh [-r REV] [-n PAIRS] [-- BENCH FLAGS]
#
# REV defaults to f1faf3b (the last commit before the state moved into
# shards); BENCH FLAGS default to "--kernel rbf --partitions 3 --events
# 300000 --rounds 3 --snapshot-every 0". The bench keeps the service's
# calibrated certainty since 2026-11-27; when REV's bench has no
# --calibration-window (it ran without calibration), the new binary runs
# with --calibration-window 0, so that both do the same work.
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=f1faf3b pairs=3
while getopts "r:n:" o; do
  case $o in r) rev=$OPTARG ;; n) pairs=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--kernel rbf --partitions 3 --events 300000 --rounds 3 --snapshot-every 0)

work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/old" "$rev" >/dev/null
(cd "$work/old" && go build -o "$work/streamer-old" ./cmd/streamer)
go build -o "$work/streamer-new" ./cmd/streamer

new_flags=()
if ! "$work/streamer-old" bench --help 2>&1 | grep -q -- --calibration-window; then
  new_flags=(--calibration-window 0)
  echo "$rev's bench runs without calibration: the new binary too (--calibration-window 0)" >&2
fi
run() {
  local extra=()
  [ "$1" = new ] && extra=("${new_flags[@]}")
  "$work/streamer-$1" bench "${flags[@]}" "${extra[@]}" --json 2>/dev/null >"$work/$1-$2.json"
}
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then run old "$i"; run new "$i"; else run new "$i"; run old "$i"; fi
  echo "pair $i of $pairs done" >&2
done

/usr/bin/env python3 - "$work" "$pairs" "$rev" "${flags[*]}" <<'PY'
import json, statistics, sys
work, pairs, rev, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def score(name, i):
    rep = json.load(open(f"{work}/{name}-{i}.json"))
    return next(p["median"] for p in rep["summary"]["pipelines"] if p["pipeline"] == "score")
old = [score("old", i) for i in range(1, pairs + 1)]
new = [score("new", i) for i in range(1, pairs + 1)]
ratios = [n / o for n, o in zip(new, old)]
print(f"streamer bench {flags}")
print(f"{'pair':>4} {'old ' + rev:>18} {'new':>12} {'new/old':>8}")
for i, (o, n, r) in enumerate(zip(old, new, ratios), 1):
    print(f"{i:>4} {o:>18,.0f} {n:>12,.0f} {r:>8.2f}")
print(f"median score events/s: old {statistics.median(old):,.0f}, new {statistics.median(new):,.0f}; "
      f"median ratio new/old {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
