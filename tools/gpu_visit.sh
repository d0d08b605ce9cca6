#!/usr/bin/env bash
# One visit to the GPU machine (docs/gpu_playbook.md), as one command: install the carried wheels, then run the
# stages named in $STAGES, each under its own time limit, and pack everything under $OUT into one archive
# ($OUT/visit.tgz, plus summary.txt beside it): only 8 files come back from a visit, and a benchmark writes one file
# per cell. A stage past its limit is stopped; what it wrote (finished cells, finished runs) is kept.
#
# One command may run 600 s (docs/gpu_playbook.md): keep the limits of the stages of one visit under ~560 s in all.
#
#   OUT=/tmp/out bash tools/gpu_visit.sh                       # check, peers, flash: 240 + 180 + 120 s at most
#   OUT=/tmp/out STAGES=bench bash tools/gpu_visit.sh
#   OUT=/tmp/out STAGES=listops LISTOPS_VARIANTS="flash linformer" bash tools/gpu_visit.sh
#   OUT=/tmp/out STAGES=runs RUNS_FILE=tools/gpu_jobs/protocols_listops_cpu.txt bash tools/gpu_visit.sh
#
# Stages and their settings (environment variables, defaults in brackets):
#   check    tools/check_flex_paths.py $CHECK_ARGS [""], limit $CHECK_S [240]
#   peers    tools/bench_peers.py $PEERS_ARGS [""], limit $PEERS_S [180]
#   flash    tools/bench_flash.py $FLASH_ARGS ["--n 4096 --batch 32 --no-dropout"], limit $FLASH_S [120]
#   bench    scripts/benchmark.py -m attention=$BENCH_VARIANTS [flash,softmax,linformer,performer,local,bigbird]
#            bench.seq_lens=[$BENCH_LENS] [1024,4096,16384] bench.modes=[model] $BENCH_ARGS [""], limit $BENCH_S [540]
#   listops  run.py task=listops profile=paper seed=$SEED [0] for each of $LISTOPS_VARIANTS [flash], one after
#            another, $LISTOPS_ARGS [""], limit $LISTOPS_S [540] for all of them
#   runs     run.py once per line of $RUNS_FILE (its overrides; blank lines and '#' comments skipped), $RUNS_PARALLEL
#            [4] at a time in the file's order (put the longest first), each with $RUNS_ARGS [""] after the line's
#            own overrides and $RUNS_THREADS [1] CPU threads; the data is prepared once before
#            (scripts/prepare_data.py with the first line's overrides), so that parallel runs only read the cache;
#            records under runs/, one log per run under logs/, one line per run in runs.txt; limit $RUNS_S [540]
#            for all of them (a run still going then is stopped like a preempted one: it checkpoints and leaves no
#            record). The runs write to $VISIT_RUNS [/tmp/visit-runs], outside $OUT, copied into runs/ before packing:
#            the same command sent again on the still-warm machine skips the finished runs and resumes the stopped
#            ones from their checkpoints (in /tmp/lra-cache). On a fresh machine, $RUNS_FROM (a carried folder: the
#            runs/ of earlier visits' archives) is copied into $VISIT_RUNS first, so its finished runs are skipped;
#            a run stopped on a machine that was given back starts over.
# Set RUNS_S from the device tool's `status` for a second command of a visit: budget_left_s minus ~60 s (the start
# of a machine and the packing), or the command is killed before it packs and nothing comes back.
set -u
: "${OUT:?set OUT to the folder that comes back (the \$OUT of the device tool)}"
mkdir -p "$OUT"
if compgen -G ".device-wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl
  export PYTHONPATH="/tmp/site:$PWD"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}  # deterministic cuBLAS, as the runs ask for
VISIT_RUNS=${VISIT_RUNS:-/tmp/visit-runs}
summary="$OUT/summary.txt"
{
  date -u +"started %Y-%m-%dT%H:%M:%SZ"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')"
} > "$summary" 2>&1

stage() {  # stage NAME LIMIT_S COMMAND...: run under a time limit, log to $OUT/NAME.log, note the outcome
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout --signal=TERM --kill-after=20 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s (limit $limit s)$([ $rc -eq 124 ] && echo ', stopped at its limit')" >> "$summary"
}

run_one() {  # run_one LINE: run.py with the overrides of one line of $RUNS_FILE, then one line in runs.txt
  local line=$1 log rc
  log="$OUT/logs/$(printf '%s' "$line" | tr -c 'A-Za-z0-9._=-' '_' | cut -c1-180).log"
  # shellcheck disable=SC2086  # the line and $RUNS_ARGS are lists of overrides
  python3 run.py $line ${RUNS_ARGS:-} "paths.results_dir=$VISIT_RUNS" paths.cache_dir=/tmp/lra-cache > "$log" 2>&1
  rc=$?
  echo "exit $rc: $line" >> "$OUT/runs.txt"
}

runs_stage() {  # the runs stage: prepare the data once, then $RUNS_PARALLEL runs at a time
  local jobs
  jobs=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "${RUNS_FILE:?set RUNS_FILE to a file of run.py overrides}")
  mkdir -p "$OUT/logs"
  export OMP_NUM_THREADS=${RUNS_THREADS:-1} MKL_NUM_THREADS=${RUNS_THREADS:-1}  # parallel runs share the cores
  # shellcheck disable=SC2086
  python3 scripts/prepare_data.py $(printf '%s\n' "$jobs" | head -n 1) ${RUNS_ARGS:-} paths.cache_dir=/tmp/lra-cache \
    || return
  printf '%s\n' "$jobs" | xargs -d '\n' -P "${RUNS_PARALLEL:-4}" -n 1 bash -c 'run_one "$1"' _
}

wait_for_runs() {  # a stopped stage's runs are still checkpointing when timeout returns: let them finish (<= 40 s)
  local i
  for i in $(seq 80); do
    pgrep -f "paths.results_dir=$VISIT_RUNS" > /dev/null || return 0
    sleep 0.5
  done
  echo "runs: some still going 40 s after the stage's limit (their stop-time checkpoints may be cut short)" >> "$summary"
}

export -f run_one runs_stage  # the stage runs them in a child shell, under timeout
export OUT RUNS_FILE RUNS_ARGS RUNS_PARALLEL RUNS_THREADS VISIT_RUNS

for s in ${STAGES:-check peers flash}; do
  case $s in
    check) stage check "${CHECK_S:-240}" python3 tools/check_flex_paths.py ${CHECK_ARGS:-} ;;
    peers) stage peers "${PEERS_S:-180}" python3 tools/bench_peers.py --out "$OUT/peers" ${PEERS_ARGS:-} ;;
    flash) stage flash "${FLASH_S:-120}" python3 tools/bench_flash.py ${FLASH_ARGS:---n 4096 --batch 32 --no-dropout} ;;
    bench) stage bench "${BENCH_S:-540}" python3 scripts/benchmark.py -m \
             "attention=${BENCH_VARIANTS:-flash,softmax,linformer,performer,local,bigbird}" \
             "bench.seq_lens=[${BENCH_LENS:-1024,4096,16384}]" "bench.modes=[model]" "paths.bench_dir=$OUT/bench" \
             "paths.cache_dir=/tmp/lra-cache" ${BENCH_ARGS:-} ;;
    listops)
      t_end=$((SECONDS + ${LISTOPS_S:-540}))
      for v in ${LISTOPS_VARIANTS:-flash}; do
        left=$((t_end - SECONDS))
        if [ "$left" -le 30 ]; then echo "listops-$v: not started, no time left" >> "$summary"; continue; fi
        stage "listops-$v" "$left" python3 run.py "attention=$v" task=listops profile=paper "seed=${SEED:-0}" \
          task.generator.workers=16 "paths.results_dir=$OUT/runs" paths.cache_dir=/tmp/lra-cache ${LISTOPS_ARGS:-}
      done ;;
    runs)
      mkdir -p "$VISIT_RUNS"
      if [ -n "${RUNS_FROM:-}" ]; then cp -rn "$RUNS_FROM/." "$VISIT_RUNS/"; fi  # earlier visits' records: skipped
      stage runs "${RUNS_S:-540}" bash -c runs_stage
      wait_for_runs
      mkdir -p "$OUT/runs" && cp -r "$VISIT_RUNS/." "$OUT/runs/"
      ok=$(grep -c '^exit 0:' "$OUT/runs.txt" 2>/dev/null)  # nothing when no run got as far as runs.txt
      echo "runs: ${ok:-0} of $(grep -cv -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$RUNS_FILE") runs finished with" \
        "exit 0" >> "$summary" ;;
    *) echo "unknown stage $s (check, peers, flash, bench, listops, runs)" >> "$summary" ;;
  esac
done
date -u +"finished %Y-%m-%dT%H:%M:%SZ" >> "$summary"
archive=$(mktemp /tmp/visit.XXXXXX.tgz)  # outside $OUT: an archive growing inside the folder it packs changes it
tar czf "$archive" -C "$OUT" --exclude=./summary.txt --warning=no-file-changed .
if [ $? -le 1 ]; then  # 1: a file changed while it was read (a log); the archive is complete
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.txt -exec rm -rf {} +
  mv "$archive" "$OUT/visit.tgz"
else
  echo "packing failed: the files stay unpacked under \$OUT (only 8 come back)" >> "$summary"
fi
cat "$summary"
