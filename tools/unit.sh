#!/usr/bin/env bash
# Runs the tests of every package of the main module, one package at a
# time, as `go test -p 1 -count=1 ./...` would, with their test binaries
# built beforehand:
#
#   tools/unit.sh [go test build flags, e.g. -race]
#
# SKIP, when set, is a -test.skip pattern for every package's tests.
# Building (linking) a test binary takes seconds and `go test -p 1` builds
# each right before it runs; building them first, on every core, leaves
# the run itself one package at a time: the NATS cluster and multi-process
# tests hold real raft timers, and on a 2-core machine two such packages
# side by side starve each other's elections.
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

echo "== test: running them one package at a time"
failed=0
while read -r pkg dir; do
  bin="$work/${pkg##*/}.test"
  out="$work/out"
  start=$EPOCHREALTIME
  rc=0
  # As go test runs a test binary: from the package's directory, with its
  # default 10-minute timeout; output shown whole when the package fails.
  (cd "$dir" && "$bin" -test.count=1 -test.timeout=10m -test.paniconexit0 ${SKIP:+-test.skip="$SKIP"}) >"$out" 2>&1 </dev/null || rc=$?
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  if [ "$rc" = 0 ]; then
    printf 'ok  \t%s\t%ss\n' "$pkg" "$took"
  else
    cat "$out"
    printf 'FAIL\t%s\t%ss\n' "$pkg" "$took"
    failed=1
  fi
  rm -f "$bin"
done <"$work/pkgs"
exit "$failed"
