#!/bin/sh
# make_golden.sh records LIBSVM's answers for the agreement test of online/svm
# (TestAgreementGolden). Run from the repository root: sh tests/svmbench/make_golden.sh
# Needs svm-train and svm-predict (Debian libsvm-tools 3.24).
#
# Cases: heart_scale (270 rows, no separate test split: the training set is the test set) and
# ripley (ripley_train.csv / ripley_test.csv, the given split), rbf and linear kernels, two
# (C, gamma) settings each. Every case runs exactly
#
#   svm-train -s 0 -t T -c C -g G -e 0.001 -m 100 -h 1 TRAIN MODEL      (-g only for rbf)
#   svm-predict TEST MODEL PRED
#
# and golden.tsv gets: name, train, test, kernel, C, gamma, obj, rho, nSV, nBSV, label order
# of the model file (rho refers to the first label as +1), iterations.
set -eu
cd "$(dirname "$0")/../../online/svm/testdata"
out=golden
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

csv2svm() { # CSV with header, label last → LIBSVM format, all features written (%.17g)
	awk -F, 'NR > 1 { printf "%s", $NF; for (i = 1; i < NF; i++) printf " %d:%.17g", i, $i; printf "\n" }' "$1"
}
csv2svm ripley_train.csv >"$tmp/ripley_train"
csv2svm ripley_test.csv >"$tmp/ripley_test"

printf 'name\ttrain\ttest\tkernel\tC\tgamma\tobj\trho\tnSV\tnBSV\tlabels\titer\n' >"$out/golden.tsv"
run() { # name train test kernel C gamma
	name=$1 train=$2 test=$3 kernel=$4 c=$5 g=$6
	case $kernel in
	rbf) targs="-t 2 -g $g" ;;
	linear) targs="-t 0" ;;
	esac
	# shellcheck disable=SC2086
	svm-train -s 0 $targs -c "$c" -e 0.001 -m 100 -h 1 "$tmp/$train" "$tmp/$name.model" >"$out/$name.train.txt"
	svm-predict "$tmp/$test" "$tmp/$name.model" "$out/$name.pred" >/dev/null
	obj=$(sed -n 's/^obj = \([^,]*\), rho = \(.*\)$/\1/p' "$out/$name.train.txt")
	rho=$(sed -n 's/^obj = \([^,]*\), rho = \(.*\)$/\2/p' "$out/$name.train.txt")
	nsv=$(sed -n 's/^nSV = \([0-9]*\), nBSV = \([0-9]*\)$/\1/p' "$out/$name.train.txt")
	nbsv=$(sed -n 's/^nSV = \([0-9]*\), nBSV = \([0-9]*\)$/\2/p' "$out/$name.train.txt")
	iter=$(sed -n 's/^optimization finished, #iter = \([0-9]*\)$/\1/p' "$out/$name.train.txt")
	labels=$(sed -n 's/^label //p' "$tmp/$name.model" | tr ' ' ',')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$train" "$test" "$kernel" "$c" "$g" \
		"$obj" "$rho" "$nsv" "$nbsv" "$labels" "$iter" >>"$out/golden.tsv"
}
cp heart_scale "$tmp/heart_scale"
run heart_rbf_c1 heart_scale heart_scale rbf 1 0.07692307692307693
run heart_rbf_c10 heart_scale heart_scale rbf 10 0.5
run heart_lin_c1 heart_scale heart_scale linear 1 0
run heart_lin_c10 heart_scale heart_scale linear 10 0
run ripley_rbf_c1 ripley_train ripley_test rbf 1 0.5
run ripley_rbf_c10 ripley_train ripley_test rbf 10 5
run ripley_lin_c1 ripley_train ripley_test linear 1 0
run ripley_lin_c10 ripley_train ripley_test linear 10 0
column -t "$out/golden.tsv" 2>/dev/null || cat "$out/golden.tsv"
