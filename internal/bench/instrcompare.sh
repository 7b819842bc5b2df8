#!/usr/bin/env bash
# instrcompare.sh counts the instructions per operation of one go test
# benchmark at earlier commits and in this checkout: exact counts
# (valgrind's cachegrind), where timings on a shared VM drift by ±20%, so
# that a change of a few per cent in the work shows. Instructions are not
# time (a mispredicted branch or a cache miss costs cycles, not
# instructions): decide a change by alternating timings
# (benchcompare.sh), and use the counts to see where instructions go and
# to confirm a change did what it meant to.
#
#   internal/bench/instrcompare.sh [-r REV]... [-n ITERS] PKG REGEX
#
# e.g. internal/bench/instrcompare.sh -r 5d86503 ./stream/wire 'Decode32Random/six'
#
# REGEX must select one benchmark (a sub-benchmark by its full name). Each
# binary runs it twice under cachegrind, with ITERS and 2·ITERS
# iterations (-test.benchtime Nx, -test.cpu 1): the difference, over
# ITERS, is the count of one operation, set-up cancelled. Needs valgrind
# (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/../.."
revs=() iters=20000
while getopts "r:n:" o; do
  case $o in r) revs+=("$OPTARG") ;; n) iters=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-r REV]... [-n ITERS] PKG REGEX" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
pkg=$1 regex=$2

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
