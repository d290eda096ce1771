#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/) of the instrumented build in build-sanitize/.
#   scripts/fuzz.sh TARGET...|all [SECONDS]  SECONDS per target, default 600
#   QFORGE_FUZZ_JOBS=2 scripts/fuzz.sh all    two targets at a time (one core each)
#   scripts/fuzz.sh --report TARGET|all       the table of the last runs again, from their logs
# Each target runs in libFuzzer's fork mode with one worker, so that it goes on after a crash, an
# out-of-memory or a timeout and reports them all: new corpus inputs go to
# build-sanitize/fuzz-corpus/TARGET (seeded from fuzz/corpus/TARGET and fuzz/regressions/TARGET,
# not committed), crashing inputs to build-sanitize/fuzz-crashes/TARGET (crash-*, oom-*,
# timeout-*), the log to build-sanitize/fuzz-logs/TARGET.log. A table sums the runs up at the end.
# A crash worth keeping goes to fuzz/regressions/TARGET once fixed (replayed by ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
targets_all=(onnx_model executor backend_json quant_config npy idx image convert prepared_model
             qat_checkpoint)
report_only=false
if [ "${1:-}" = --report ]; then
  report_only=true
  shift
fi
[ $# -ge 1 ] || { echo "usage: scripts/fuzz.sh [--report] TARGET...|all [SECONDS]" >&2; exit 2; }
seconds=600
if [[ ${*: -1} =~ ^[0-9]+$ ]]; then
  seconds=${*: -1}
  set -- "${@:1:$#-1}"
fi
if [ "${1:-}" = all ]; then targets=("${targets_all[@]}"); else targets=("$@"); fi
jobs=${QFORGE_FUZZ_JOBS:-1}
build=build-sanitize

# Inputs large enough for a small model, a prepared model directory or a checkpoint.
max_len() {
  case "$1" in
    prepared_model | qat_checkpoint) echo 65536 ;;
    onnx_model | executor | image) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

if ! $report_only; then
  scripts/sanitize.sh --configure-only
  cmake --build "$build" -j "${QFORGE_BUILD_JOBS:-$(nproc)}" --target "${targets[@]/%/_fuzz}"
  # shellcheck source=sanitizers/env.sh
  source scripts/sanitizers/env.sh

  run_one() {
    local t=$1 corpus=$build/fuzz-corpus/$1 crashes=$build/fuzz-crashes/$1
    mkdir -p "$corpus" "$crashes" "$build/fuzz-logs"
    local seeds=(fuzz/corpus/"$t")
    [ -d fuzz/regressions/"$t" ] && seeds+=(fuzz/regressions/"$t")
    local dict=()
    [ -f fuzz/"$t".dict ] && dict=(-dict=fuzz/"$t".dict)
    # Scratch files in a directory of this run: a worker killed at a finding leaves its own
    # behind, which goes with the directory at the end.
    local tmp=$build/fuzz-tmp/$t
    rm -rf "$tmp" && mkdir -p "$tmp"
    # -fork=1 with -ignore_*: keep fuzzing after a finding. QFORGE_NUM_THREADS=1: one core per job.
    TMPDIR=$tmp QFORGE_NUM_THREADS=1 "$build/fuzz/${t}_fuzz" "$corpus" "${seeds[@]}" "${dict[@]}" \
      -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
      -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 -max_total_time="$seconds" \
      -artifact_prefix="$crashes/" >"$build/fuzz-logs/$t.log" 2>&1 || true
    rm -rf "$tmp"
  }

  for t in "${targets[@]}"; do
    [ -f fuzz/"$t"_fuzz.cpp ] || { echo "fuzz.sh: no target $t (fuzz/${t}_fuzz.cpp)" >&2; exit 2; }
  done
  for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    echo "fuzz.sh: $t for ${seconds}s" >&2
    run_one "$t" &
  done
  wait
fi

# Fork mode's status lines: "#EXECS: cov: C ft: F corp: N exec/s: E oom/timeout/crash: O/T/X
# time: Ss job: J dft_time: D"; the first one is after the seeds.
printf '%-15s %8s %10s %8s %7s %6s %8s %12s %10s\n' target seconds executions exec/s crashes ooms \
  timeouts coverage corpus
for t in "${targets[@]}"; do
  log=$build/fuzz-logs/$t.log
  [ -f "$log" ] || { printf '%-15s %s\n' "$t" "not run"; continue; }
  first=$(grep -E '^#[0-9]+: cov:' "$log" | head -1 || true)
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1 || true)
  if [ -z "$last" ]; then
    printf '%-15s %s\n' "$t" "no fuzzing status in $log"
    continue
  fi
  field() { sed -E "s|.* $1:? ([^ ]+).*|\\1|" <<<"$2"; }
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  secs=$(field time "$last" | tr -d s)
  counts=$(field oom/timeout/crash "$last")
  IFS=/ read -r ooms timeouts crashes <<<"$counts"
  rate=$((secs > 0 ? execs / secs : 0))
  printf '%-15s %8s %10s %8s %7s %6s %8s %12s %10s\n' "$t" "$secs" "$execs" "$rate" "$crashes" \
    "$ooms" "$timeouts" "$(field cov "$first")->$(field cov "$last")" "$(field corp "$last")"
done
