/* fuzz.h: shared pieces of the libFuzzer harnesses in fuzz/.
 *
 * Every harness is a plain function lmb_fuzz_<name>(data, size) over the
 * pure-C kernel (no Lua). Built with -DLIMBER_LIBFUZZER (CMake option
 * LIMBER_FUZZ, clang) each file also defines LLVMFuzzerTestOneInput; in the
 * normal build the same functions are linked into limber_fuzz_replay, which
 * replays fuzz/regressions/<name>/ on every test run.
 *
 * A harness returns 0, and calls lmb_fuzz_fail() (abort) when the kernel
 * breaks one of its documented promises (an oracle check), so a libFuzzer
 * run and the replay driver both stop on it. */
#ifndef LIMBER_FUZZ_H
#define LIMBER_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Reads fixed-size fields from the front of the input; past the end it
 * yields zeros, so every input is usable. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

static inline uint8_t fz_u8(fz_reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static inline uint32_t fz_u32(fz_reader *r) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)fz_u8(r) << (8 * k);
    return v;
}

/* A size or offset: mostly small, sometimes huge (near SIZE_MAX or 2^32),
 * to exercise overflow-safe bound checks. */
static inline size_t fz_size(fz_reader *r, size_t small_max) {
    uint8_t mode = fz_u8(r);
    uint32_t v = fz_u32(r);
    switch (mode % 8) {
    case 0:
        return SIZE_MAX - v % 64;
    case 1:
        return (size_t)v;
    case 2:
        return ((size_t)1 << 32) + v % 64;
    default:
        return small_max ? v % (small_max + 1) : 0;
    }
}

#define lmb_fuzz_fail(...)                                                                         \
    do {                                                                                           \
        fprintf(stderr, "fuzz oracle: " __VA_ARGS__);                                              \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                                         \
        abort();                                                                                   \
    } while (0)

int lmb_fuzz_glb(const uint8_t *data, size_t size);
int lmb_fuzz_base64(const uint8_t *data, size_t size);
int lmb_fuzz_accessor(const uint8_t *data, size_t size);
int lmb_fuzz_sparse(const uint8_t *data, size_t size);
int lmb_fuzz_influences(const uint8_t *data, size_t size);
int lmb_fuzz_skeleton(const uint8_t *data, size_t size);
int lmb_fuzz_skin_target(const uint8_t *data, size_t size);
int lmb_fuzz_snapshot(const uint8_t *data, size_t size);

#ifdef LIMBER_LIBFUZZER
#define LMB_FUZZ_ENTRY(fn)                                                                         \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {                                 \
        return fn(data, size);                                                                     \
    }
#else
#define LMB_FUZZ_ENTRY(fn)
#endif

#endif
