#!/bin/sh
# mpi_vs_threads.sh: one 40-step attograd-gpt run (0.8M parameters: 4 layers, n_embd 128, block
# 64, batch 16 as 2 shards, no validation) as 2 processes x 1 thread (mpi2) or 1 process x 2
# threads (omp2): the same work and the same bits. Prints the trainer's "done" line and the
# reduction's time. docs/mpi.md, "Measured", alternates the two (bench/ab.py: wall, CPU, A/B):
#   bench/ab.py -n 5 'bench/mpi_vs_threads.sh mpi2 DATA' 'bench/mpi_vs_threads.sh omp2 DATA'
# The overlap of the reduction with backward (docs/mpi.md, "Overlap"), on against off:
#   bench/ab.py -n 9 'bench/mpi_vs_threads.sh mpi2 DATA 200' \
#       'env AG_DIST_OVERLAP=0 bench/mpi_vs_threads.sh mpi2 DATA 200'
# Usage: [MPI_FLAGS=...] [AG_DIST_OVERLAP=0|1] bench/mpi_vs_threads.sh mpi2|omp2 DATA [STEPS]
# (DATA: a folder from attograd-gpt prepare; STEPS: 40 unless given); MPI_FLAGS: more mpirun
# flags (docs/mpi.md: --mca btl_vader_single_copy_mechanism none); needs make and make MPI=1
# first.
set -eu
export AG_DIST_OVERLAP="${AG_DIST_OVERLAP:-1}"
M=build/float-mpi/examples/attograd-gpt
G=build/examples/attograd-gpt
args="--data $2 --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 16
      --max-iters ${3:-40} --warmup-iters 2 --eval-interval 1000 --eval-iters 1 --dropout 0 --force
      --shards 2 --out build/bench/mpi_vs_threads_$1"
case $1 in
mpi2) mpirun --allow-run-as-root -np 2 --bind-to core -x AG_DIST_OVERLAP ${MPI_FLAGS:-} $M train $args --threads 1 ;;
omp2) $G train $args --threads 2 ;;
*) echo "usage: $0 mpi2|omp2 DATA [STEPS]" >&2; exit 2 ;;
esac | grep -E '^done|reduction' | tr '\n' ' '
echo
