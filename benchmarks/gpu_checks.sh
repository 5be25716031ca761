#!/usr/bin/env bash
# Every check that needs a CUDA GPU, one after the other, each under its own time limit, logged into a folder:
#
#   benchmarks/gpu_checks.sh OUT_DIR                      # compile, step, speed, tests, learn (~15 minutes)
#   benchmarks/gpu_checks.sh OUT_DIR compile step         # only these stages, in this order
#
# Stages (OUT_DIR/<stage>.log each, the JSON of the benchmarks beside them):
#   compile  benchmarks/compile_check.py: the GPU presets' models compiled by inductor against eager, part by part
#   step     benchmarks/gpu.py --part step: the trainer's step of darcy-gpu per run.compile, with bfloat16, and
#            with the model alone compiled (--model-only) (on 64 training samples of its data: the same step),
#            each then traced for 10 steps (--profile): device busy against wall-clock time, kernels by kind
#   speed    benchmarks/gpu.py --part speed at n = 8192 and 65,536, float32 and bfloat16, against the reference
#            Galerkin Transformer (galerkin-transformer 0.2.1 installed; its rows fail with a message otherwise),
#            and galerkin1d recomputing its layers or its FFNs only (--checkpoint) with CUDA graphs, each traced
#            for 5 steps (--profile)
#   mesh     benchmarks/gpu.py --part step of darcy-mesh-quick (mesh_latent on level1 meshes, batch 16), eager and with
#            CUDA graphs (every batch padded to the split's largest mesh), on 120 samples of its data; on request
#   tests    pytest -m cuda: the CUDA-marked tests (CLI flows on the GPU, sync-free steps, CPU evaluation of a
#            CUDA-trained checkpoint)
#   learn    darcy-gpu trained eagerly and with CUDA graphs side by side, the same seed, 10 epochs on 200 samples
#            of its data (LEARN_MODES, LEARN_EPOCHS to change): a compiled run must learn what the eager one
#            learns (the H200 of 2026-11-27 compiled a model that did not; estimated 3 minutes)
#   train    petrov train darcy-gpu (10 minutes of training, ~13 with its data) and its evaluation; TRAIN_PRESET
#            names another preset, TRAIN_MINUTES another budget (with a 10-minute limit per call: TRAIN_MINUTES=6,
#            the Darcy data solved in ~1.5 minutes on 16 cores), TRAIN_SET more overrides (KEY=VALUE words, each
#            passed as one --set: TRAIN_SET='data.augment="square"'), TRAIN_NAME the run's folder under OUT_DIR
#            (default: the preset's name)
#   accuracy benchmarks/gpu.py --part accuracy: latent2d (physics), fno2d, transolver2d and neuraloperator's FNO (its
#            wheels in WHEELS) on Darcy 85, each trained for ACCURACY_MINUTES (default 1: with the data, ~2 minutes on
#            16 cores, and each contender's compilation and evaluation, within one 10-minute call), then tested at
#            61, 85, 141 and 211; the data under OUT_DIR/data, the tables in accuracy.log, gpu-accuracy.json and
#            the runs beside them
#   presets  darcy-gpu, burgers-gpu and darcy-inverse-gpu trained at once on the one GPU, each to its own time
#            budget, then evaluated (~15 minutes with their data; logs presets-PRESET.log): sharing the GPU,
#            each trains fewer epochs in its budget than it would alone, so what each reaches is a
#            conservative figure for a GPU of its own; PRESETS names others (the same three by default),
#            PRESET_MINUTES sets one budget for all (PRESET_MINUTES=4: all three in one 10-minute call)
#
# petrov is taken from this checkout where `python` cannot import it (a `petrov` link to it on PYTHONPATH).  WHEELS=DIR
# first installs DIR's wheels without an index (an offline GPU machine: what its image lacks, pyamg, scikit-fem and
# meshio, the reference galerkin-transformer 0.2.1 with torchinfo and plotly for `speed`, neuraloperator 2.0.0 with
# what it imports for `accuracy`) into OUT_DIR/.site.
# A stage that fails or runs out of time is reported and the next one runs: the summary at the end says which.
# Each stage is capped (seconds: compile 300, step 240, speed 420, tests 420, learn 300, accuracy 600, train and
# presets 1000; STAGE_SECONDS sets one cap for all), and stopped whole at its cap (its process group: no worker of
# it runs on into the next stage's timings); PYTHON (default python) runs them.  Taken on one H200
# (2026-11-28): compile 230 s (with pytest beside it), step 149 s, tests over 200 s (one test did not finish).
set -u
out=${1:?usage: benchmarks/gpu_checks.sh OUT_DIR [compile|step|mesh|speed|tests|learn|accuracy|train|presets ...]}
shift
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(compile step speed tests learn)
py=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1

# pytest-xdist (PYTEST_WORKERS processes, default 8) and pytest-timeout (TEST_SECONDS per test, default 240)
# where they are installed: on one H200, 136 of the 137 CUDA tests took under 200 s with 8 workers
test_options() {
    "$py" -c "import xdist" 2>/dev/null && echo "-n ${PYTEST_WORKERS:-8} --dist load"
    "$py" -c "import pytest_timeout" 2>/dev/null && echo "--timeout ${TEST_SECONDS:-240}"
}

# the learn stage's summary: each run's best validation and test relative L2 (test: reported, never selected on)
export learn_table='import json, sys
for mode in sys.argv[2:]:
    m = json.load(open(sys.argv[1] + "/learn-" + mode + "/metrics.json"))
    tests = ", ".join("%d: %.3e" % (r["resolution"], r["mean"]) for r in m["rows"])
    print("learn %-12s best validation %.3e (epoch %d); test %s" % (mode, m["best_val_rel_l2"], m["best_epoch"], tests))'

run_stage() {
    case $1 in
        compile) (cd "$here" && "$py" compile_check.py) ;;
        # a small file of the preset's data: the step needs a few batches, not the 1224 samples (2 minutes to solve)
        step) (cd "$here" && "$py" gpu.py --part step --out "$out/gpu-step.json" --step-set "data.path='$out/darcy-step.h5'" \
                --step-set data.generate.n_samples=80 --step-set data.n_train=64 --step-set data.n_val=8 \
                --step-set data.n_test=8 --model-only --profile 10) ;;
        mesh) (cd "$here" && "$py" gpu.py --part step --step-preset darcy-mesh-quick --compile off cuda-graphs \
                --step-amp 0 --step-set "data.path='$out/darcy-mesh-step.h5'" --step-set data.generate.n_samples=120 \
                --step-set data.n_train=96 --step-set data.n_val=12 --step-set data.n_test=12 --profile 5 \
                --out "$out/gpu-mesh-step.json") ;;
        speed) (cd "$here" && "$py" gpu.py --part speed --n 8192 65536 --precisions float32 bf16 --checkpoint \
                --profile 5 --out "$out/gpu-speed.json") ;;
        accuracy) (cd "$here" && "$py" gpu.py --part accuracy --budget-minutes "${ACCURACY_MINUTES:-1}" \
                --data-dir "$out/data" --out "$out/gpu.json") ;;
        # -v: each test's verdict as it ends, so a stage cut short still names the tests that never finished;
        # with pytest-timeout a test stuck for TEST_SECONDS fails with its stack instead of taking the stage
        tests) (cd "$here/.." && "$py" -m pytest -m cuda -v -p no:cacheprovider --rootdir=tests --durations=20 \
                $(test_options) tests) ;;
        learn) for mode in ${LEARN_MODES:-off cuda-graphs}; do
                   "$py" -m petrov train darcy-gpu --out "$out/learn-$mode" --set run.compile="$mode" \
                       --set '~run.time_budget_minutes' --set run.fill_budget=false \
                       --set optim.epochs="${LEARN_EPOCHS:-10}" \
                       --set "data.path='$out/darcy-learn.h5'" --set data.generate.n_samples=240 \
                       --set data.n_train=200 --set data.n_val=20 --set data.n_test=20 || return 1
               done
               "$py" -c "$learn_table" "$out" ${LEARN_MODES:-off cuda-graphs} ;;
        # TRAIN_PRESET (default darcy-gpu) trained for TRAIN_MINUTES (default: the preset's budget), its Darcy data
        # solved by one worker per core this process may use (nproc alone would count OMP_NUM_THREADS); the
        # data are written under OUT_DIR
        train) preset=${TRAIN_PRESET:-darcy-gpu}
               cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
               run=$out/${TRAIN_NAME:-$preset}
               options=(--set "data.path='$out/data/$preset.h5'")
               [ -n "${TRAIN_MINUTES:-}" ] && options+=(--set "run.time_budget_minutes=$TRAIN_MINUTES")
               case $preset in darcy*) options+=(--set "data.generate.options.workers=$cores") ;; esac
               for override in ${TRAIN_SET:-}; do options+=(--set "$override"); done
               "$py" -m petrov train "$preset" --out "$run" "${options[@]}" \
                   && "$py" -m petrov evaluate "$run" --device cuda ;;
        # run from OUT_DIR: the presets' data paths (data/...) are relative to the working directory;
        # darcy-inverse-gpu trains on darcy-gpu's file, so it starts once darcy-gpu (listed before it) has solved it
        presets) cd "$out" || return 1
                 presets=(${PRESETS:-darcy-gpu burgers-gpu darcy-inverse-gpu})
                 budget=()
                 [ -n "${PRESET_MINUTES:-}" ] && budget=(--set "run.time_budget_minutes=$PRESET_MINUTES")
                 pids=()
                 darcy=
                 for preset in "${presets[@]}"; do
                     (if [ "$preset" = darcy-inverse-gpu ]; then
                          while [ -n "$darcy" ] && [ ! -e data/darcy-421-1224.h5 ] && kill -0 "$darcy" 2>/dev/null
                          do sleep 5; done
                      fi
                      "$py" -m petrov train "$preset" --out "$out/$preset" "${budget[@]}" \
                          && "$py" -m petrov evaluate "$out/$preset") > "$out/presets-$preset.log" 2>&1 &
                     pids+=($!)
                     [ "$preset" = darcy-gpu ] && darcy=$!
                 done
                 failed=0
                 for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
                 for preset in "${presets[@]}"; do
                     echo "--- $preset"; tail -n 12 "$out/presets-$preset.log"
                 done
                 return $failed ;;
        *) echo "unknown stage '$1': use compile, step, mesh, speed, tests, learn, accuracy, train or presets"; return 2 ;;
    esac
}

if [ -n "${WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$out/.site" "$WHEELS"/*.whl || exit 1
    export PYTHONPATH=$out/.site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$py" -c "import petrov" 2>/dev/null; then
    mkdir -p "$out/.petrov-link" && ln -sfn "$(cd "$here/.." && pwd)" "$out/.petrov-link/petrov" || exit 1
    export PYTHONPATH=$out/.petrov-link${PYTHONPATH:+:$PYTHONPATH}
fi
"$py" -c "import torch, petrov; print('torch', torch.__version__, 'CUDA', torch.version.cuda, '|', \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO CUDA DEVICE')" | tee "$out/device.log"
summary=()
for stage in "${stages[@]}"; do
    case $stage in compile) limit=300 ;; step) limit=240 ;; tests|speed) limit=420 ;; accuracy) limit=600 ;;
                   train|presets) limit=1000 ;;
                   *) limit=300 ;; esac
    limit=${STAGE_SECONDS:-$limit}
    start=$(date +%s)
    echo "=== $stage (limit ${limit} s) ==="
    # the stage in a process group of its own, all of it stopped at the limit: a test's or a benchmark's
    # worker left running would use the GPU during the next stage's timings
    setsid bash -c "$(declare -f run_stage test_options); here='$here' out='$out' py='$py' run_stage $stage" \
        > "$out/$stage.log" 2>&1 &
    group=$!
    # (its own output to /dev/null, its sleep ended with it: nothing of it may hold a pipe that reads this script)
    (trap 'kill "$nap"; exit 0' TERM
     sleep "$limit" & nap=$!
     wait "$nap" && touch "$out/.$stage.late" && kill -TERM -- -"$group" && sleep 10 && kill -KILL -- -"$group"
    ) >/dev/null 2>&1 &
    watchdog=$!
    wait "$group"
    rc=$?
    kill "$watchdog" 2>/dev/null
    kill -KILL -- -"$group" 2>/dev/null  # whatever the stage left behind
    [ -e "$out/.$stage.late" ] && rc=124 && rm -f "$out/.$stage.late"
    tail -n 25 "$out/$stage.log"
    case $rc in 0) verdict=ok ;; 124|137) verdict="out of time" ;; *) verdict="failed (rc $rc)" ;; esac
    summary+=("$stage: $verdict in $(( $(date +%s) - start )) s")
done
echo "=== summary ==="
printf '%s\n' "${summary[@]}" | tee "$out/summary.log"
