#!/usr/bin/env bash
# cores.sh measures how one instance scales with the machine's cores, the
# checks of a many-core machine (issue 37's; docs/performance.md, "Known
# limits"): for linear d = 32 and rbf D = 256, 8 partitions,
#
#   1. with the embedded broker, all cores: score / pass-through events/s
#      (the broker's own limit is the ceiling; target ≥ 0.8);
#   2. without a broker (--no-broker: records from memory through the
#      fetch-to-publish path into a discarding publisher): score events/s
#      on all cores against the same binary pinned to two (taskset -c 0,1),
#      the two alternating (target ≥ 5× on 16 cores).
#
#   internal/bench/cores.sh [-b BINARY] [-e EVENTS] [-p PAIRS]
#
# BINARY defaults to a build of this checkout (needs Go); on a machine
# without Go, build it elsewhere (go build -o streamer ./cmd/streamer) and
# pass it with -b. It needs taskset (util-linux) and awk, nothing else.
# EVENTS defaults to 400000 per run, PAIRS (of pinned and unpinned runs) to 2.
set -euo pipefail
bin="" events=400000 pairs=2
while getopts "b:e:p:" o; do
  case $o in b) bin=$OPTARG ;; e) events=$OPTARG ;; p) pairs=$OPTARG ;; *) exit 2 ;; esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
  (cd "$(dirname "$0")/../.." && go build -o "$work/streamer" ./cmd/streamer)
  bin=$work/streamer
fi
cores=$(nproc)
echo "cores.sh: $cores cores; $bin; $events events per run" >&2

# median events/s of the score pipeline, and the median within-round
# score/pass-through ratio, from a bench report on stdin.
score() { awk -F'|' '$2 ~ /^ score $/ && $3 ~ /^ [0-9]+ $/ { gsub(/ /, "", $3); print $3; exit }'; }
ratio() { awk -F'|' '$2 ~ /^ score\/passthrough $/ && $3 ~ /^ [0-9.]+ $/ { gsub(/ /, "", $3); v = $3 } END { print v }'; }

common=(--partitions 8 --events "$events" --snapshot-every 0)
printf '| kernel | with broker: score / pass-through (≥ 0.8) | no broker: score events/s, all %d cores | pinned to 2 cores | all / pinned (≥ 5 on 16 cores) |\n' "$cores"
printf '|---|---|---|---|---|\n'
for kernel in linear rbf; do
  "$bin" bench --kernel "$kernel" "${common[@]}" --rounds 2 >"$work/broker.txt" 2>&1
  r=$(ratio <"$work/broker.txt")
  all=() pinned=()
  for i in $(seq 1 "$pairs"); do
    # alternate which runs first, so that drift weighs on both alike
    for which in $([ $((i % 2)) -eq 1 ] && echo "all pinned" || echo "pinned all"); do
      if [ "$which" = all ]; then
        all+=("$("$bin" bench --kernel "$kernel" "${common[@]}" --rounds 2 --no-broker 2>&1 | score)")
      else
        pinned+=("$(taskset -c 0,1 "$bin" bench --kernel "$kernel" "${common[@]}" --rounds 2 --no-broker 2>&1 | score)")
      fi
    done
    echo "$kernel: pair $i of $pairs done" >&2
  done
  med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  a=$(med "${all[@]}") p=$(med "${pinned[@]}")
  printf '| %s | %s | %s (%s) | %s (%s) | %.2f |\n' "$kernel" "$r" "$a" "${all[*]}" "$p" "${pinned[*]}" "$(awk -v a="$a" -v p="$p" 'BEGIN { print a / p }')"
done
