/* cli.c: the command line of attograd-translate. The input is split at newlines into
 * arguments (at most 64) after the program name; tr_check_args parses and checks them like
 * tr_main, but no command runs. It must return 0 or 2, never exit or crash. */
#include <string.h>

#include "fuzz.h"
#include "translate.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "attograd-translate";
    char *p = text;
    while (argc <= MAX_ARGS && p < text + size) {
        char *nl = memchr(p, '\n', (size_t)(text + size - p));
        if (nl) *nl = '\0';
        argv[argc++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    argv[argc] = NULL;
    int rc = tr_check_args(argc, argv);
    FUZZ_CHECK(rc == TR_EXIT_OK || rc == TR_EXIT_USAGE, "exit code %d", rc);
    free(text);
    return 0;
}
