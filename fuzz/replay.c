/* replay.c: runs saved inputs through the fuzz harnesses without libFuzzer
 * (limber_fuzz_replay, built by the normal CMake build; with
 * LIMBER_SANITIZE=ON it runs under ASan + UBSan).
 *
 *   limber_fuzz_replay DIR            every DIR/<harness>/<file>
 *   limber_fuzz_replay HARNESS FILE.. the given files through one harness
 *
 * A harness that finds a broken promise aborts; otherwise prints one line
 * per harness with the number of inputs replayed and exits 0. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

typedef int (*harness_fn)(const uint8_t *, size_t);

static const struct {
    const char *name;
    harness_fn fn;
} harnesses[] = {{"glb", lmb_fuzz_glb},
                 {"base64", lmb_fuzz_base64},
                 {"accessor", lmb_fuzz_accessor},
                 {"sparse", lmb_fuzz_sparse},
                 {"influences", lmb_fuzz_influences},
                 {"skeleton", lmb_fuzz_skeleton},
                 {"skin_target", lmb_fuzz_skin_target},
                 {"snapshot", lmb_fuzz_snapshot}};
#define NHARNESS (sizeof harnesses / sizeof harnesses[0])

static harness_fn find(const char *name) {
    for (size_t k = 0; k < NHARNESS; k++)
        if (strcmp(harnesses[k].name, name) == 0) return harnesses[k].fn;
    return NULL;
}

static int run_file(harness_fn fn, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "limber_fuzz_replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = (uint8_t *)malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *grown = (uint8_t *)realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "limber_fuzz_replay: out of memory reading %s\n", path);
        return 1;
    }
    /* an exact-size copy, as libFuzzer passes it: overreads are ASan reports */
    uint8_t *exact = (uint8_t *)malloc(n ? n : 1);
    if (exact && n) memcpy(exact, buf, n);
    free(buf);
    if (!exact) return 1;
    fn(exact, n);
    free(exact);
    return 0;
}

static int run_dir(const char *root) {
    int failed = 0;
    for (size_t k = 0; k < NHARNESS; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, harnesses[k].name);
        DIR *d = opendir(dir);
        if (!d) continue;
        unsigned count = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            failed |= run_file(harnesses[k].fn, path);
            count++;
        }
        closedir(d);
        printf("%s: %u inputs replayed\n", harnesses[k].name, count);
    }
    return failed;
}

int main(int argc, char **argv) {
    if (argc == 2) return run_dir(argv[1]);
    if (argc >= 3) {
        harness_fn fn = find(argv[1]);
        if (!fn) {
            fprintf(stderr, "limber_fuzz_replay: unknown harness %s\n", argv[1]);
            return 2;
        }
        int failed = 0;
        for (int i = 2; i < argc; i++)
            failed |= run_file(fn, argv[i]);
        printf("%s: %d inputs replayed\n", argv[1], argc - 2);
        return failed;
    }
    fprintf(stderr, "usage: limber_fuzz_replay DIR | limber_fuzz_replay HARNESS FILE...\n");
    return 2;
}
