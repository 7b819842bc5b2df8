#!/usr/bin/env bash
# benchcompare.sh measures a package's go test benchmarks at earlier
# commits and in this checkout on the same machine in one run: the test
# binaries take turns (rev1, rev2, …, this checkout, then again), so that
# the machine's drift and its other load fall on all of them alike. It
# prints benchstat's medians (rev1 is the base) and each binary's fastest
# run (the least disturbed one on a shared machine).
#
#   internal/bench/benchcompare.sh [-r REV]... [-n ROUNDS] [-t BENCHTIME] PKG REGEX
#
# e.g. internal/bench/benchcompare.sh -r b008808 -r 71f38f4 -n 10 ./online \
#        'MAMRBF256$|MAMRBF256Auto|RBFMap256|RBFProject256|Sincos$'
# benchstat runs through the Go module proxy
# (go run golang.org/x/perf/cmd/benchstat@latest).
set -euo pipefail
cd "$(dirname "$0")/../.."
revs=() rounds=6 benchtime=300ms
while getopts "r:n:t:" o; do
  case $o in r) revs+=("$OPTARG") ;; n) rounds=$OPTARG ;; t) benchtime=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-r REV]... [-n ROUNDS] [-t BENCHTIME] PKG REGEX" >&2; exit 2; }
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
