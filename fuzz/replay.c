/* replay.c: runs a harness (linked in) over saved inputs, without libFuzzer: every file in the
 * folders given (or the files themselves), in name order. Built with the default toolchain, so
 * `make test` replays fuzz/regressions/<harness>/ in every configuration (under ASan and UBSan
 * with DEBUG=1): an input that once crashed fails the suite if its bug comes back. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0, k;
    uint8_t *buf = malloc(cap);
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    /* an exact-size copy, so that ASan sees a read past the end as libFuzzer would */
    uint8_t *data = malloc(n ? n : 1);
    memcpy(data, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

int main(int argc, char **argv) {
    int n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) != 0) return 1;
            n_inputs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t n = 0;
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
        if (d) closedir(d);
        qsort(names, n, sizeof *names, by_name);
        for (size_t k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
            if (replay_file(path) != 0) return 1;
            n_inputs++;
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d inputs: no crash, every invariant held\n", n_inputs);
    return 0;
}
