/* limber.c: status strings and CPU feature dispatch. */
#include "limber.h"

const char *lmb_strerror(lmb_status s) {
    switch (s) {
    case LMB_OK: return "ok";
    case LMB_ENOMEM: return "out of memory";
    case LMB_ERANGE: return "index or count out of range";
    case LMB_ECYCLE: return "a joint is its own ancestor (cycle)";
    case LMB_EDUPNAME: return "duplicate joint name";
    case LMB_ENAN: return "value is NaN or infinite";
    case LMB_ESIZE: return "buffer sizes do not match";
    case LMB_EMISMATCH: return "objects do not belong together";
    case LMB_EINVAL: return "invalid argument";
    }
    return "unknown error";
}

int lmb_cpu_has_avx2(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return cached;
#else
    return 0;
#endif
}

int lmb_cpu_has_avx512(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        /* libgcc also checks that the OS saves the 512-bit state (XCR0) */
        cached = lmb_cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512vl");
    }
    return cached;
#else
    return 0;
#endif
}

static int simd_limit = LMB_SIMD_AVX512;

int lmb_set_simd(int enable) {
    int old = lmb_simd_active();
    simd_limit = enable ? LMB_SIMD_AVX512 : LMB_SIMD_PORTABLE;
    return old;
}

int lmb_simd_cpu_level(void) {
    return lmb_cpu_has_avx512() ? LMB_SIMD_AVX512 : lmb_cpu_has_avx2() ? LMB_SIMD_AVX2
                                                                        : LMB_SIMD_PORTABLE;
}

int lmb_set_simd_level(int level) {
    int old = lmb_simd_level();
    simd_limit = level < LMB_SIMD_PORTABLE ? LMB_SIMD_PORTABLE
               : level > LMB_SIMD_AVX512   ? LMB_SIMD_AVX512
                                           : level;
    return old;
}

int lmb_simd_level(void) {
    int cpu = lmb_simd_cpu_level();
    return simd_limit < cpu ? simd_limit : cpu;
}

int lmb_simd_active(void) { return lmb_simd_level() >= LMB_SIMD_AVX2; }
