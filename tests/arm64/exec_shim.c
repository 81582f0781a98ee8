/* exec_shim.c: lets an arm64 program under qemu-user start other arm64 programs, for
 * `make test-arm64` (tests/arm64/qemu.sh loads it into every arm64 process it starts).
 * Without binfmt_misc (containers, CI runners) the host kernel cannot run an arm64 file, and
 * Criterion starts each test by executing its own program again (BoxFort's "boxfort-worker"):
 * execve() here runs an arm64 file as qemu-aarch64 -L ROOT -E LD_PRELOAD=<this shim> -0 ARGV0
 * FILE ARGS..., and anything else (a shell, python3) unchanged. The shim takes LD_PRELOAD out
 * of the environment as it loads, so that host programs started later never see an arm64
 * library there.
 * execv() too (glibc's calls its own execve). A program started with exactly the environment
 * it was given keeps it: qemu gets the library folder and the shim as options, not variables.
 * Not here: the programs that the tests start through a shell (system(), popen()): they are
 * reached through the wrapper scripts tests/arm64/qemu.sh writes (AG_TRANSLATE_BIN, ...).
 * Built for arm64: aarch64-linux-gnu-gcc -shared -fPIC (the Makefile's test-arm64). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char qemu[4096], root[4096], preload[4096 + 16];

__attribute__((constructor)) static void shim_init(void) {
    const char *q = getenv("AG_QEMU"), *r = getenv("QEMU_LD_PREFIX"), *p = getenv("LD_PRELOAD");
    strncpy(qemu, q ? q : "/usr/bin/qemu-aarch64", sizeof qemu - 1);
    if (r) strncpy(root, r, sizeof root - 1);
    if (p) {
        memcpy(preload, "LD_PRELOAD=", 11);
        strncpy(preload + 11, p, sizeof preload - 12);
    }
    unsetenv("LD_PRELOAD");
}

/* 1 when path is an ELF file for aarch64 */
static int is_arm64(const char *path) {
    Elf64_Ehdr h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, &h, sizeof h);
    close(fd);
    return n == (ssize_t)sizeof h && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 &&
           h.e_machine == EM_AARCH64;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    int (*real)(const char *, char *const[], char *const[]) =
        (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (!is_arm64(path)) return real(path, argv, envp);
    size_t n = 0, ne = 0;
    while (argv[n]) n++;
    while (envp[ne]) ne++;
    char **args = calloc(n + 10 + ne + 1, sizeof *args), **env = args + n + 10;
    if (!args) {
        errno = ENOMEM;
        return -1;
    }
    /* qemu-user 7.2 hands the environment to the program in reverse order (it builds its list
     * by inserting at the head): given reversed, the program sees it as the caller wrote it */
    for (size_t i = 0; i < ne; i++) env[i] = envp[ne - 1 - i];
    env[ne] = NULL;
    size_t k = 0;
    args[k++] = qemu;
    if (root[0]) args[k++] = "-L", args[k++] = root;
    if (preload[0]) args[k++] = "-E", args[k++] = preload;
    args[k++] = "-0", args[k++] = n ? argv[0] : (char *)path;
    args[k++] = (char *)path;
    for (size_t i = 1; i < n; i++) args[k++] = argv[i];
    args[k] = NULL;
    real(qemu, args, env);
    int e = errno;
    free(args);
    errno = e;
    return -1;
}

/* glibc's execv calls its own execve, not the one above: the tests start programs with it */
int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }
