/* test_shards.c: token shards in llm.c's format and the window loader (src/text/shards.c). The
 * bytes a shard holds are checked by hand (header ints, token width, little-endian), shards made
 * by hand are read, damaged headers and sizes are refused naming the path and the reason, the
 * loader's windows are checked against the tokens, and a resumed loader draws the same batches
 * as a straight one. Not here: tokenizers (test_tokenizer.c). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

static void put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

Test(txt_shard, uint16_shards_hold_llm_c_header_and_tokens) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    ts_join(path, dir, "train.bin");
    int ids[] = {0, 1, 65535, 258, 7};
    cr_assert_eq(txt_shard_write(path, ids, 5, 65536), AG_OK, "%s", ag_last_error());
    size_t len;
    uint8_t *b = (uint8_t *)ts_read_text(path, &len);
    cr_assert_eq(len, 1024 + 5 * 2);
    cr_assert_eq(get32le(b), 20240520);
    cr_assert_eq(get32le(b + 4), 1);
    cr_assert_eq(get32le(b + 8), 5);
    for (int i = 3; i < 256; i++) cr_assert_eq(get32le(b + 4 * i), 0);
    cr_assert(b[1024 + 4] == 0xff && b[1024 + 5] == 0xff && b[1024 + 6] == 2 && b[1024 + 7] == 1);
    int *back;
    size_t n;
    cr_assert_eq(txt_shard_read(path, 65536, &back, &n), AG_OK, "%s", ag_last_error());
    cr_assert(n == 5 && memcmp(back, ids, sizeof ids) == 0);
    free(back);
    free(b);
    ts_rm_tree(dir);
}

Test(txt_shard, vocabularies_over_65536_use_uint32_with_llm_c_llama3_header) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    ts_join(path, dir, "big.bin");
    int ids[] = {70000, 3, 65536};
    cr_assert_eq(txt_shard_write(path, ids, 3, 70001), AG_OK, "%s", ag_last_error());
    size_t len;
    uint8_t *b = (uint8_t *)ts_read_text(path, &len);
    cr_assert_eq(len, 1024 + 3 * 4);
    cr_assert_eq(get32le(b), 20240801);
    cr_assert_eq(get32le(b + 4), 7);
    cr_assert_eq(get32le(b + 8), 3);
    cr_assert_eq(get32le(b + 1024), 70000);
    int *back;
    size_t n;
    cr_assert_eq(txt_shard_read(path, 70001, &back, &n), AG_OK, "%s", ag_last_error());
    cr_assert(n == 3 && memcmp(back, ids, sizeof ids) == 0);
    free(back);
    /* read with a smaller vocabulary: the token over it is named */
    cr_assert_eq(txt_shard_read(path, 70000, &back, &n), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), path) && strstr(ag_last_error(), "token 0 = 70000"), "%s",
              ag_last_error());
    cr_assert_null(back);
    free(b);
    ts_rm_tree(dir);
}

Test(txt_shard, an_empty_shard_round_trips) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    ts_join(path, dir, "empty.bin");
    cr_assert_eq(txt_shard_write(path, NULL, 0, 100), AG_OK);
    int *back;
    size_t n = 9;
    cr_assert_eq(txt_shard_read(path, 100, &back, &n), AG_OK, "%s", ag_last_error());
    cr_assert_eq(n, 0);
    free(back);
    ts_rm_tree(dir);
}

Test(txt_shard, the_writer_refuses_ids_outside_the_vocabulary_and_writes_nothing) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    ts_join(path, dir, "x.bin");
    int ids[] = {1, 2, 10};
    cr_assert_eq(txt_shard_write(path, ids, 3, 10), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "token 2 = 10"), "%s", ag_last_error());
    cr_assert_null(ts_slurp(path, NULL));
    ids[2] = -1;
    cr_assert_eq(txt_shard_write(path, ids, 3, 10), AG_ERR_RANGE);
    /* a folder that does not exist */
    ts_join(path, dir, "no/such/x.bin");
    ids[2] = 3;
    cr_assert_eq(txt_shard_write(path, ids, 3, 10), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), path), "%s", ag_last_error());
    ts_rm_tree(dir);
}

/* a shard made by hand: header ints h0 h1 h2, then tokens bytes of data */
static void hand_shard(const char *path, int32_t h0, int32_t h1, int32_t h2, const void *data,
                       size_t n) {
    uint8_t *b = calloc(1, 1024 + n);
    put32le(b, (uint32_t)h0);
    put32le(b + 4, (uint32_t)h1);
    put32le(b + 8, (uint32_t)h2);
    if (n) memcpy(b + 1024, data, n);
    ts_write_bytes(path, b, 1024 + n);
    free(b);
}

static void refused(const char *path, int vocab, int code, const char *reason) {
    int *ids = (int *)1;
    size_t n = 1;
    int rc = txt_shard_read(path, vocab, &ids, &n);
    cr_assert_eq(rc, code, "rc %d for '%s': %s", rc, reason, ag_last_error());
    cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0 && strstr(ag_last_error(), reason),
              "expected '%s' in: %s", reason, ag_last_error());
    cr_assert(ids == NULL && n == 0);
}

Test(txt_shard, damaged_headers_and_sizes_are_refused_naming_path_and_reason) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    ts_join(path, dir, "bad.bin");
    const uint16_t tok[4] = {1, 2, 3, 4};
    hand_shard(path, 20240520, 1, 4, tok, 8);
    int *ids;
    size_t n;
    cr_assert_eq(txt_shard_read(path, 0, &ids, &n), AG_OK, "%s", ag_last_error()); /* by hand */
    cr_assert(n == 4 && ids[3] == 4);
    free(ids);
    hand_shard(path, 20240521, 1, 4, tok, 8);
    refused(path, 0, AG_ERR_FORMAT, "magic 20240521 version 1: not a token shard");
    hand_shard(path, 20240520, 7, 4, tok, 8); /* the uint32 version with the uint16 magic */
    refused(path, 0, AG_ERR_FORMAT, "version 7");
    hand_shard(path, 20240520, 1, 5, tok, 8);
    refused(path, 0, AG_ERR_FORMAT, "the header says 5 tokens (1034 bytes), the file has 1032");
    hand_shard(path, 20240520, 1, 3, tok, 8);
    refused(path, 0, AG_ERR_FORMAT, "the header says 3 tokens");
    hand_shard(path, 20240520, 1, -1, tok, 8);
    refused(path, 0, AG_ERR_FORMAT, "token count -1");
    hand_shard(path, 20240520, 1, INT32_MAX, tok, 8); /* a huge count: refused before malloc */
    refused(path, 0, AG_ERR_FORMAT, "the header says 2147483647 tokens");
    hand_shard(path, 20240801, 7, 2, tok, 8);
    cr_assert_eq(txt_shard_read(path, 0, &ids, &n), AG_OK); /* 2 uint32 tokens */
    cr_assert(n == 2 && ids[0] == (1 | 2 << 16) && ids[1] == (3 | 4 << 16));
    free(ids);
    refused(path, 65536, AG_ERR_RANGE, "token 0 = 131073 outside the vocabulary [0, 65536)");
    ts_write_bytes(path, "short", 5);
    refused(path, 0, AG_ERR_FORMAT, "5 bytes: shorter than the 1024-byte header");
    ts_join(path, dir, "missing.bin");
    refused(path, 0, AG_ERR_IO, "cannot open");
    ts_rm_tree(dir);
}

/* ---- the split and the loader ---- */

Test(txt_loader, the_split_keeps_the_last_part_for_validation) {
    TxtSplitRange s = txt_split_range(1000, 0.1);
    cr_assert(s.train_lo == 0 && s.train_hi == 900 && s.valid_lo == 900 && s.valid_hi == 1000);
    s = txt_split_range(7, 0.0);
    cr_assert(s.train_hi == 7 && s.valid_lo == 7 && s.valid_hi == 7);
    s = txt_split_range(7, 1.0);
    cr_assert(s.train_hi == 0 && s.valid_lo == 0);
}

static int *counting_tokens(size_t n) {
    int *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (int)i;
    return t;
}

Test(txt_loader, windows_lie_in_their_range_and_y_is_x_shifted_by_one) {
    int *tok = counting_tokens(1000);
    TxtLoader L;
    cr_assert_eq(txt_loader_init(&L, tok, 900, 1000, 4, 16, 1, "valid"), AG_OK);
    int x[64], y[64];
    int seen_first = 0, seen_last = 0;
    for (int step = 0; step < 500; step++) {
        txt_loader_next(&L, x, y);
        for (int b = 0; b < 4; b++) {
            int s = x[b * 16];
            cr_assert(s >= 900 && s + 16 < 1000, "window at %d", s);
            seen_first |= s == 900;
            seen_last |= s + 16 == 999; /* the last window ends at the last token */
            for (int t = 0; t < 16; t++) {
                cr_assert_eq(x[b * 16 + t], s + t);
                cr_assert_eq(y[b * 16 + t], s + t + 1);
            }
        }
    }
    cr_assert(seen_first && seen_last, "the first and the last start are drawn");
    cr_assert_eq(L.batches, 500);
    free(tok);
}

Test(txt_loader, same_seed_same_windows_and_a_restored_state_continues_to_the_bit) {
    int *tok = counting_tokens(5000);
    TxtLoader a, b, c;
    cr_assert_eq(txt_loader_init(&a, tok, 0, 4500, 3, 8, 42, "t"), AG_OK);
    cr_assert_eq(txt_loader_init(&b, tok, 0, 4500, 3, 8, 42, "t"), AG_OK);
    cr_assert_eq(txt_loader_init(&c, tok, 0, 4500, 3, 8, 43, "t"), AG_OK);
    int xa[24], ya[24], xb[24], yb[24], xc[24], yc[24];
    int differ = 0;
    for (int i = 0; i < 10; i++) {
        txt_loader_next(&a, xa, ya);
        txt_loader_next(&b, xb, yb);
        txt_loader_next(&c, xc, yc);
        cr_assert(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0);
        differ |= memcmp(xa, xc, sizeof xa) != 0;
    }
    cr_assert(differ, "another seed draws other windows");
    /* save, continue a; a new loader restored from the state gives the same batches */
    int64_t state[TXT_LOADER_STATE_LEN];
    txt_loader_state(&a, state);
    cr_assert_eq(state[4], 10);
    int want[5][24];
    for (int i = 0; i < 5; i++) txt_loader_next(&a, want[i], ya);
    TxtLoader r;
    cr_assert_eq(txt_loader_init(&r, tok, 0, 4500, 3, 8, 999, "t"), AG_OK);
    cr_assert_eq(txt_loader_restore(&r, state, "ckpt.npz"), AG_OK);
    for (int i = 0; i < 5; i++) {
        txt_loader_next(&r, xb, yb);
        cr_assert(memcmp(xb, want[i], sizeof xb) == 0, "batch %d after the restore differs", i);
    }
    cr_assert_eq(r.batches, 15);
    free(tok);
}

Test(txt_loader, bad_ranges_and_states_are_refused) {
    int tok[10] = {0};
    TxtLoader L;
    cr_assert_eq(txt_loader_init(&L, tok, 0, 8, 1, 8, 1, "tiny.bin"), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "tiny.bin: 8 tokens: a window of block 8 needs 9"), "%s",
              ag_last_error());
    cr_assert_eq(txt_loader_init(&L, tok, 0, 9, 1, 8, 1, "t"), AG_OK); /* exactly one window */
    cr_assert_eq(txt_loader_init(&L, tok, 0, 10, 0, 8, 1, "t"), AG_ERR_ARG);
    int64_t zero[TXT_LOADER_STATE_LEN] = {0};
    cr_assert_eq(txt_loader_restore(&L, zero, "ckpt.npz"), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "ckpt.npz: the loader's RNG state is all zeros"), "%s",
              ag_last_error());
    int64_t neg[TXT_LOADER_STATE_LEN] = {1, 2, 3, 4, -1};
    cr_assert_eq(txt_loader_restore(&L, neg, "ckpt.npz"), AG_ERR_RANGE);
}

/* ---- parts of a shard: what a trainer reads of its windows (docs/mpi.md) ---- */

Test(txt_shard, parts_read_from_an_open_shard_are_its_tokens_each_checked) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    int *ids = counting_tokens(10000);
    ids[7777] = 20000; /* outside a vocabulary of 10000 */
    cr_assert_eq(txt_shard_write(ts_join(path, dir, "t.bin"), ids, 10000, 20001), AG_OK);
    TxtShard *s;
    cr_assert_eq(txt_shard_open(path, 10000, &s), AG_OK, "%s", ag_last_error());
    cr_assert_eq(txt_shard_count(s), 10000);
    int got[5000];
    cr_assert_eq(txt_shard_tokens(s, 123, 5000, got), AG_OK, "%s", ag_last_error());
    cr_assert(memcmp(got, ids + 123, 5000 * sizeof(int)) == 0);
    cr_assert_eq(txt_shard_tokens(s, 9990, 10, got), AG_OK); /* the last tokens */
    cr_assert(memcmp(got, ids + 9990, 10 * sizeof(int)) == 0);
    cr_assert_eq(txt_shard_tokens(s, 7000, 1000, got), AG_ERR_RANGE);
    cr_assert(
        strstr(ag_last_error(), "t.bin: token 7777 = 20000 outside the vocabulary [0, 10000)"),
        "%s", ag_last_error());
    txt_shard_close(s);
    /* the loader's starts are the windows txt_loader_next reads */
    TxtLoader a, b;
    cr_assert_eq(txt_loader_init(&a, ids, 100, 9000, 4, 16, 5, "t"), AG_OK);
    cr_assert_eq(txt_loader_init(&b, NULL, 100, 9000, 4, 16, 5, "t"), AG_OK);
    int x[64], y[64];
    size_t starts[4];
    for (int i = 0; i < 20; i++) {
        txt_loader_next(&a, x, y);
        txt_loader_starts(&b, starts);
        for (int r = 0; r < 4; r++) cr_assert_eq((size_t)x[r * 16], starts[r]);
    }
    cr_assert_eq(b.batches, 20);
    /* a header that is not a shard is refused at open, naming the path */
    ts_write_bytes(path, "not a shard", 11);
    cr_assert_eq(txt_shard_open(path, 0, &s), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "t.bin"), "%s", ag_last_error());
    free(ids);
    ts_rm_tree(dir);
}

Test(txt_shard, a_part_past_the_end_aborts, .signal = SIGABRT) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    int ids[4] = {1, 2, 3, 0}, got[4];
    cr_assert_eq(txt_shard_write(ts_join(path, dir, "t.bin"), ids, 4, 4), AG_OK);
    TxtShard *s;
    cr_assert_eq(txt_shard_open(path, 4, &s), AG_OK);
    txt_shard_tokens(s, 2, 3, got);
}

Test(txt_loader, next_aborts_on_a_loader_without_tokens, .signal = SIGABRT) {
    TxtLoader L;
    int x[8], y[8];
    cr_assert_eq(txt_loader_init(&L, NULL, 0, 100, 1, 8, 1, "t"), AG_OK);
    txt_loader_next(&L, x, y);
}

Test(txt_shard, windows_read_from_a_shard_are_the_loaders_rows_and_a_bad_token_is_named) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "shard");
    int *ids = counting_tokens(3000);
    cr_assert_eq(txt_shard_write(ts_join(path, dir, "w.bin"), ids, 3000, 3001), AG_OK);
    TxtShard *s;
    cr_assert_eq(txt_shard_open(path, 3000, &s), AG_OK, "%s", ag_last_error());
    TxtLoader a, b;
    cr_assert_eq(txt_loader_init(&a, ids, 0, 3000, 4, 16, 9, "t"), AG_OK);
    cr_assert_eq(txt_loader_init(&b, NULL, 0, 3000, 4, 16, 9, "t"), AG_OK);
    int xa[64], ya[64], xb[64], yb[64], win[17];
    size_t starts[4];
    for (int i = 0; i < 10; i++) {
        txt_loader_next(&a, xa, ya);
        txt_loader_starts(&b, starts);
        memset(xb, -1, sizeof xb), memset(yb, -1, sizeof yb);
        /* rows 1..3 alone (another process's rows 0), then row 0 */
        cr_assert_eq(txt_shard_windows(s, starts + 1, 3, 16, win, xb + 16, yb + 16), AG_OK);
        cr_assert_eq(xb[0], -1);
        cr_assert_eq(txt_shard_windows(s, starts, 1, 16, win, xb, yb), AG_OK);
        cr_assert(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0);
    }
    cr_assert_eq(txt_shard_windows(s, NULL, 0, 16, NULL, NULL, NULL), AG_OK); /* no rows */
    txt_shard_close(s);
    ids[2000] = 3000; /* outside a vocabulary of 3000 */
    cr_assert_eq(txt_shard_write(path, ids, 3000, 3001), AG_OK);
    cr_assert_eq(txt_shard_open(path, 3000, &s), AG_OK);
    size_t at[2] = {10, 1990};
    cr_assert_eq(txt_shard_windows(s, at, 2, 16, win, xb, yb), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "w.bin: token 2000 = 3000 outside the vocabulary [0, 3000)"),
              "%s", ag_last_error());
    cr_assert(xb[0] == 10 && yb[15] == 26); /* the row before it was read */
    txt_shard_close(s);
    free(ids);
    ts_rm_tree(dir);
}
