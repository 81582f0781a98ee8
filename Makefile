# attograd: one Makefile for the library, examples, tests and installation.
#   make                    build/libattograd.a, build/libattograd.so and the examples
#   make test               the Criterion suite, float and double builds, OpenMP with 2 threads
#   make OMP=0 test         the same without OpenMP
#   make DEBUG=1 test       with AddressSanitizer and UndefinedBehaviorSanitizer
#   make REAL=double        the double build (in build/double)
#   make install PREFIX=... static and shared library, headers, pkg-config file
#   make format             clang-format every source file
# Each configuration builds in its own folder: build/ (float), build/double, build/float-noomp,
# build/double-debug, ... so that switching never mixes objects.

REAL ?= float
OMP ?= 1
DEBUG ?= 0
ARCH ?= native
PREFIX ?= /usr/local
THREADS ?= 2

ifneq ($(REAL),float)
ifneq ($(REAL),double)
$(error REAL must be float or double, not '$(REAL)')
endif
endif

SUFFIX := $(if $(filter 0,$(OMP)),-noomp)$(if $(filter 1,$(DEBUG)),-debug)
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
CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wshadow -Wno-unknown-pragmas \
          -fPIC -Isrc -march=$(ARCH)
ifeq ($(DEBUG),1)
CFLAGS += -O1 -g -DAG_DEBUG -fsanitize=address,undefined -fno-sanitize-recover=all \
          -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
else
CFLAGS += -O2 -g
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
LDLIBS := -lm

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
HEADERS := src/attograd.h $(sort $(wildcard src/*/*.h src/*/*.def))
TEST_SRC := $(sort $(wildcard tests/*/test_*.c))
TEST_LIB_SRC := $(sort $(wildcard tests/support/*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(B)/obj/%.o) $(TEST_LIB_SRC:%.c=$(B)/obj/%.o)

.PHONY: all lib test test-one test-torch deps-test install uninstall format clean help
all: lib

lib: $(B)/libattograd.a $(B)/libattograd.so

$(B)/obj/%.o: %.c $(HEADERS) $(wildcard tests/support/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $(VARIANT)  $<"
	@$(CC) $(CFLAGS) -Itests/support -c $< -o $@

$(B)/libattograd.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libattograd.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---- tests ----
$(B)/tests/run_tests: $(TEST_OBJ) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(B)/libattograd.a -lcriterion $(LDLIBS)

$(B)/tests/dump_cases: $(B)/obj/tests/tools/dump_cases.o $(TEST_LIB_SRC:%.c=$(B)/obj/%.o) $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/torch_dump: $(B)/obj/tests/tools/torch_dump.o $(B)/libattograd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps-test:
	@scripts/deps.sh libcriterion-dev zlib1g-dev pkg-config

# The double build runs first: the float suite compares its results with the double build's
# (tests/autograd/test_precision.c runs build/double*/tests/dump_cases).
test: deps-test
	$(MAKE) --no-print-directory REAL=double test-one
	$(MAKE) --no-print-directory REAL=float test-one
	$(MAKE) --no-print-directory REAL=double test-torch

# attograd vs PyTorch on the same weights (where python3-torch is installed)
test-torch: $(B)/tests/torch_dump
	OMP_NUM_THREADS=$(THREADS) tests/nn/test_torch.sh $(B)/tests/torch_dump

test-one: $(B)/tests/run_tests $(B)/tests/dump_cases
	OMP_NUM_THREADS=$(THREADS) AG_DOUBLE_DUMP=$(CURDIR)/$(DOUBLE_B)/tests/dump_cases \
	    $(B)/tests/run_tests -j2 --short-filename

# ---- install ----
install: lib
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/attograd
	install -m 644 $(B)/libattograd.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/libattograd.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 src/attograd.h $(DESTDIR)$(PREFIX)/include/attograd/
	for d in $(sort $(dir $(wildcard src/*/*.h))); do \
	    install -d $(DESTDIR)$(PREFIX)/include/attograd/$${d#src/}; \
	    install -m 644 $$d*.h $(wildcard $$d*.def) $(DESTDIR)$(PREFIX)/include/attograd/$${d#src/}; \
	done
	sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@CFLAGS@|$(if $(filter double,$(REAL)),-DAG_REAL_DOUBLE)|' \
	    -e 's|@LIBS_PRIVATE@|$(if $(filter 1,$(OMP)),-fopenmp) -lm|' \
	    attograd.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/attograd.pc

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/attograd $(DESTDIR)$(PREFIX)/lib/libattograd.a \
	       $(DESTDIR)$(PREFIX)/lib/libattograd.so $(DESTDIR)$(PREFIX)/lib/pkgconfig/attograd.pc

format:
	clang-format -i $(LIB_SRC) $(filter %.h,$(HEADERS)) $(wildcard tests/*/*.c tests/*/*.h examples/*.c)

clean:
	rm -rf build
