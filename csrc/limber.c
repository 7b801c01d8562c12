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

static int simd_enabled = 1;

int lmb_set_simd(int enable) {
    int old = simd_enabled;
    simd_enabled = enable ? 1 : 0;
    return old;
}

int lmb_simd_active(void) { return simd_enabled && lmb_cpu_has_avx2(); }
