#!/usr/bin/env bash
# Runs the tests of every package of the main module, one package at a
# time, as `go test -p 1 -count=1 ./...` would, with their test binaries
# built beforehand:
#
#   tools/unit.sh [go test build flags, e.g. -race]
#
# SKIP, when set, is a -test.skip pattern for every package's tests.
# Building (linking) a test binary takes seconds and `go test -p 1` builds
# each right before it runs; so they are built first, on every core. Then
# two lanes run side by side, each one package at a time: the packages
# whose tests hold real NATS clusters or run several processes (their test
# files start a cluster or re-run their own binary), and the others. Two
# cluster packages side by side on a 2-core machine starve each other's
# raft elections; one of them beside a package of plain tests keeps a core.
set -euo pipefail
cd "$(dirname "$0")/.."

UNIT_BUILD_FLAGS="$*"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./... | sed '/^$/d' >"$work/pkgs"

echo "== test: building $(wc -l <"$work/pkgs") test binaries ($*)"
built=$EPOCHREALTIME
# One go invocation builds them all, on every core, each as
# <last element of its import path>.test (go refuses two of one name).
# shellcheck disable=SC2086
cut -d' ' -f1 "$work/pkgs" | xargs go test $UNIT_BUILD_FLAGS -c -o "$work/"
echo "== test: built in $(awk -v a="$built" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')s"

# alone: a package whose tests start a NATS cluster or re-run the test
# binary as another process.
alone() {
  grep -lqE 'StartCluster|startCluster|NewCluster|eventstest\.Cluster|exec\.Command\(os\.Args\[0\]|os\.Executable\(\)' "$1"/*_test.go 2>/dev/null
}

# run PKG DIR: the package's tests, its result line (and its whole output
# when it fails) printed once it ends; a failure leaves a mark in $work.
run() {
  local pkg=$1 dir=$2 bin out start rc=0 took
  bin="$work/${pkg##*/}.test"
  out=$(mktemp "$work/out.XXXXXX")
  start=$EPOCHREALTIME
  # As go test runs a test binary: from the package's directory, with its
  # default 10-minute timeout; output shown whole when the package fails.
  (cd "$dir" && "$bin" -test.count=1 -test.timeout=10m -test.paniconexit0 ${SKIP:+-test.skip="$SKIP"}) >"$out" 2>&1 </dev/null || rc=$?
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  if [ "$rc" = 0 ]; then
    printf 'ok  \t%s\t%ss\n' "$pkg" "$took"
  else
    { cat "$out"; printf 'FAIL\t%s\t%ss\n' "$pkg" "$took"; } >"$out.fail"
    cat "$out.fail"
    touch "$work/failed"
  fi
  rm -f "$bin" "$out"
}

echo "== test: running the cluster and multi-process packages one at a time, beside the others one at a time"
(
  while read -r pkg dir; do
    if alone "$dir"; then run "$pkg" "$dir"; fi
  done <"$work/pkgs"
) &
(
  while read -r pkg dir; do
    alone "$dir" || run "$pkg" "$dir"
  done <"$work/pkgs"
) &
wait
[ ! -e "$work/failed" ]
