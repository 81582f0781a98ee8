/* bpe_train.c: trains a byte-level BPE tokenizer on a text file and prints the time it took,
 * the vocabulary size and the compression (bytes per token), then checks that decoding the
 * encoded text gives the text back. Optionally saves the tokenizer (.npz, txt_save).
 * Usage: build/examples/bpe_train TEXT VOCAB_SIZE [none|gpt2] [OUT.npz]
 *   e.g. scripts/shakespeare.sh build/shakespeare.txt
 *        build/examples/bpe_train build/shakespeare.txt 4096
 * Exit 2 with the path and the reason on bad input. Not here: the tokenizer (src/text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

static int fail(const char *what) {
    fprintf(stderr, "bpe_train: %s\n", what);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) return fail("usage: bpe_train TEXT VOCAB_SIZE [none|gpt2] [OUT.npz]");
    char *end;
    long vocab = strtol(argv[2], &end, 10);
    if (*end || vocab < 256 || vocab > TXT_MAX_VOCAB) {
        fprintf(stderr, "bpe_train: vocabulary size '%s': must be an integer in [256, %d]\n",
                argv[2], TXT_MAX_VOCAB);
        return 2;
    }
    TxtSplit split = TXT_SPLIT_GPT2;
    if (argc >= 4) {
        if (strcmp(argv[3], "none") == 0)
            split = TXT_SPLIT_NONE;
        else if (strcmp(argv[3], "gpt2") != 0)
            return fail("split must be 'none' or 'gpt2'");
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char *text;
    size_t n;
    int read = io_read_all(f, (size_t)1 << 31, argv[1], &text, &n); /* the whole file */
    fclose(f);
    if (read != AG_OK) return fail(ag_last_error());

    double t0 = run_now_s();
    TxtTokenizer *tok;
    if (txt_bpe_train(text, n, (int)vocab, split, argv[1], &tok) != AG_OK)
        return fail(ag_last_error());
    double t1 = run_now_s();
    int *ids;
    size_t n_ids;
    if (txt_encode_alloc(tok, text, n, TXT_SPECIAL_ORDINARY, &ids, &n_ids, argv[1]) != AG_OK)
        return fail(ag_last_error());
    double t2 = run_now_s();
    char *back;
    size_t n_back;
    if (txt_decode_alloc(tok, ids, n_ids, &back, &n_back, argv[1]) != AG_OK)
        return fail(ag_last_error());
    int same = n_back == n && memcmp(back, text, n) == 0;
    printf("%s: %zu bytes, split %s\n", argv[1], n, split == TXT_SPLIT_GPT2 ? "gpt2" : "none");
    printf("trained %d merges in %.2f s: vocabulary %d\n", txt_n_merges(tok), t1 - t0,
           txt_vocab_size(tok));
    printf("encoded in %.2f s: %zu tokens, %.3f bytes per token\n", t2 - t1, n_ids,
           n_ids ? (double)n / (double)n_ids : 0.0);
    printf("decode(encode(text)) == text: %s\n", same ? "yes" : "NO");
    int rc = same ? 0 : 1;
    if (argc == 5) {
        if (txt_save(tok, argv[4]) != AG_OK)
            rc = fail(ag_last_error());
        else
            printf("saved %s\n", argv[4]);
    }
    free(back);
    free(ids);
    free(text);
    txt_free(tok);
    return rc;
}
