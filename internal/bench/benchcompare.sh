#!/usr/bin/env bash
# benchcompare.sh measures a package's go test benchmarks at earlier
# commits and in this checkout on the same machine in one run: the test
# binaries take turns (rev1, rev2, …, this checkout, then again), so that
# the machine's drift and its other load fall on all of them alike. It
# prints benchstat's medians (rev1 is the base) and each binary's fastest
# run (the least disturbed one on a shared machine).
#
#   internal/bench/benchcompare.sh [-r REV]... [-n ROUNDS] [-t BENCHTIME] PKG REGEX
#   internal/bench/benchcompare.sh [-r REV]... -i ITERS PKG REGEX
#
# e.g. internal/bench/benchcompare.sh -r b008808 -r 71f38f4 -n 10 ./online \
#        'MAMRBF256$|MAMRBF256Auto|RBFMap256|RBFProject256|Sincos$'
# benchstat runs through the Go module proxy
# (go run golang.org/x/perf/cmd/benchstat@latest).
#
# -i ITERS counts instructions instead: exact counts (valgrind's
# cachegrind), where timings on a shared VM drift by ±20%. REGEX must then
# select one benchmark (a sub-benchmark by its full name); each binary
# runs it under cachegrind with ITERS and 2·ITERS iterations
# (-test.benchtime Nx, -test.cpu 1), and the difference over ITERS is the
# count of one operation, set-up cancelled. Instructions are not time (a
# mispredicted branch or a cache miss costs cycles, not instructions):
# decide a change by the timings, on data as random as the real, and use
# the counts to see where instructions go. Needs valgrind (Debian:
# apt-get install valgrind).
#   e.g. internal/bench/benchcompare.sh -r 5d86503 -i 20000 ./stream/wire 'Decode32$'
set -euo pipefail
cd "$(dirname "$0")/../.."
revs=() rounds=6 benchtime=300ms iters=0
while getopts "r:n:t:i:" o; do
  case $o in r) revs+=("$OPTARG") ;; n) rounds=$OPTARG ;; t) benchtime=$OPTARG ;; i) iters=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-r REV]... [-n ROUNDS] [-t BENCHTIME] [-i ITERS] PKG REGEX" >&2; exit 2; }
pkg=$1 regex=$2
if [ "$iters" -gt 0 ] && ! command -v valgrind >/dev/null; then
  echo "$0: -i needs valgrind (apt-get install valgrind)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'for r in "${revs[@]}"; do git worktree remove --force "$work/src-$r" >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
names=()
for r in "${revs[@]}"; do
  git worktree add --detach "$work/src-$r" "$r" >/dev/null
  (cd "$work/src-$r" && go test -c -o "$work/$r.test" "$pkg")
  names+=("$r")
done
go test -c -o "$work/new.test" "$pkg"
names+=(new)

if [ "$iters" -gt 0 ]; then
  # count BINARY N: the instructions of a run of the benchmark with N iterations.
  count() {
    local out
    out=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
      "$1" -test.run '^$' -test.bench "$regex" -test.benchtime "${2}x" -test.cpu 1 2>&1)
    grep -q '^Benchmark' <<<"$out" || { echo "$0: $1 ran no benchmark matching $regex" >&2; exit 1; }
    awk '/I +refs:/ { gsub(",", "", $NF); print $NF }' <<<"$out"
  }
  echo "instructions per operation of $regex ($pkg), from runs of $iters and $((2 * iters)) iterations:"
  for n in "${names[@]}"; do
    a=$(count "$work/$n.test" "$iters")
    b=$(count "$work/$n.test" $((2 * iters)))
    awk -v n="$n" -v a="$a" -v b="$b" -v i="$iters" 'BEGIN { printf "  %-10s %12.1f\n", n, (b - a) / i }'
  done
  exit 0
fi

for i in $(seq 1 "$rounds"); do
  for n in "${names[@]}"; do
    "$work/$n.test" -test.run '^$' -test.bench "$regex" -test.benchtime "$benchtime" >>"$work/$n.txt" 2>/dev/null
  done
  echo "round $i of $rounds done" >&2
done

(cd "$work" && go run golang.org/x/perf/cmd/benchstat@latest -table '' "${names[@]/%/.txt}") | awk '/^$/ { exit } { print }'
for n in "${names[@]}"; do
  echo "fastest of $rounds, $n (ns/op):"
  awk '/^Benchmark/ { if (!($1 in m) || $3 < m[$1]) m[$1] = $3 } END { for (k in m) printf "  %-50s %10.1f\n", k, m[k] }' "$work/$n.txt" | sort
done
