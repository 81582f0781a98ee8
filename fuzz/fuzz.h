/* fuzz.h: what the fuzz harnesses share. Each fuzz/<name>.c defines LLVMFuzzerTestOneInput for
 * one input path of attograd (npy, npz, checkpoint, tsv, vocab, cli, tokenizer, bpe, shard,
 * safetensors, hf_config, hf_load, and attograd-gpt's gpt (its checkpoints) and prompts (--prompts files));
 * clang's libFuzzer drives it (make fuzz), and fuzz/replay.c drives it from gcc over the saved
 * inputs of fuzz/regressions/<name>/ (make test).
 * The harnesses check more than "no crash": every failure must be a known AG_ERR_* code with a
 * message that names the input, and every success must satisfy the invariants the caller relies
 * on. A broken invariant aborts (FUZZ_CHECK), which libFuzzer reports as a crash and the replay
 * as a failed test.
 * Not here: the seeds (fuzz/seeds.c) and the runner (fuzz/run.sh). */
#ifndef ATTOGRAD_FUZZ_H
#define ATTOGRAD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "attograd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with the harness, the line and the message when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz invariant broken: ", __FILE__, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A path whose file holds exactly data[0..size): a memfd (no disk writes), rewritten on each
 * call; the path stays the same for the life of the process. */
const char *fuzz_file(const void *data, size_t size);

/* A second such file, independent of the first (a harness that needs two files). */
const char *fuzz_file2(const void *data, size_t size);

/* data[0..size) as the single stored entry "x.npy" of a zip archive (CRC-32 and sizes right),
 * written to fuzz_file's path: what npz_read makes of it is then the .npy reader's work. */
const char *fuzz_npy_as_npz(const void *data, size_t size);

/* Checks what every failure must be: a known AG_ERR_* code and a message that starts with
 * what (a path, or a label the function was given). */
void fuzz_check_failure(int rc, const char *what);

#endif
