#!/bin/bash
# One petrov dataset generated as N shards by N processes at once, then merged: the plain loop for any
# scheduler or none (a workstation, a cloud VM, a scheduler without job arrays).
#
#   bash examples/generate_shards.sh                    # 4 shards of darcy at 141 on this machine
#   N=16 bash examples/generate_shards.sh               # 16 processes (one per core)
#
# Each process writes shard K/N (K = 0 .. N-1); the merge writes data/darcy-141-sharded.h5, identical to
# one `petrov generate` of all the samples. On another machine or scheduler run the same generate
# command once per index (Kubernetes indexed jobs: K is $JOB_COMPLETION_INDEX) and the merge when all are
# done. A stopped process (Ctrl-C, SIGTERM) keeps its samples; running this again continues every shard.
set -euo pipefail

N=${N:-4}
GENERATE=(darcy --n-samples "${SAMPLES:-1000}" --resolution "${RESOLUTION:-141}" --seed 0)
mkdir -p shards

# xargs exits non-zero when any shard fails: the merge then does not run
seq 0 $((N - 1)) | OMP_NUM_THREADS=1 xargs -P "$N" -I{} \
    petrov generate "${GENERATE[@]}" --shard "{}/$N" -o "shards/darcy-{}.h5" --no-progress
petrov merge shards/darcy-*.h5 -o data/darcy-141-sharded.h5 --no-progress
