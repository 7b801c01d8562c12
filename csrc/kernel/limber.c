/* limber.c: status strings and CPU feature dispatch. */
#include "limber.h"

const char *lmb_strerror(lmb_status s) {
    switch (s) {
    case LMB_OK:
        return "ok";
    case LMB_ENOMEM:
        return "out of memory";
    case LMB_ERANGE:
        return "index or count out of range";
    case LMB_ECYCLE:
        return "a joint is its own ancestor (cycle)";
    case LMB_EDUPNAME:
        return "duplicate joint name";
    case LMB_ENAN:
        return "value is NaN or infinite";
    case LMB_ESIZE:
        return "buffer sizes do not match";
    case LMB_EMISMATCH:
        return "objects do not belong together";
    case LMB_EINVAL:
        return "invalid argument";
    }
    return "unknown error";
}

/* CPU features, detected once per process. Two states may open the module
 * at the same time on two threads: the answer is computed by whichever
 * thread comes first (possibly by both, with the same result) and
 * published with atomic operations, so no thread reads a half-written
 * cache. Bits: CPU_KNOWN | CPU_AVX2 | CPU_AVX512. */
enum { CPU_KNOWN = 1, CPU_AVX2 = 2, CPU_AVX512 = 4 };
static int cpu_bits;

static int cpu_features(void) {
    int bits = __atomic_load_n(&cpu_bits, __ATOMIC_ACQUIRE);
    if (bits & CPU_KNOWN) return bits;
    bits = CPU_KNOWN;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        bits |= CPU_AVX2;
        /* libgcc also checks that the OS saves the 512-bit state (XCR0) */
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
            bits |= CPU_AVX512;
    }
#endif
    __atomic_store_n(&cpu_bits, bits, __ATOMIC_RELEASE);
    return bits;
}

int lmb_cpu_has_avx2(void) {
    return (cpu_features() & CPU_AVX2) != 0;
}

int lmb_cpu_has_avx512(void) {
    return (cpu_features() & CPU_AVX512) != 0;
}

/* The level cap is per thread: the Lua binding sets it from its state's
 * setting (lmb_simd_use) on entry to every call and in every pool job, so
 * a setting made in one lua_State never shows in another. */
static __thread int simd_limit = LMB_SIMD_AVX512;

static int clamp_level(int level) {
    return level < LMB_SIMD_PORTABLE ? LMB_SIMD_PORTABLE
           : level > LMB_SIMD_AVX512 ? LMB_SIMD_AVX512
                                     : level;
}

void lmb_simd_use(int level) {
    simd_limit = clamp_level(level);
}

int lmb_simd_cap(void) {
    return simd_limit;
}

int lmb_set_simd(int enable) {
    int old = lmb_simd_active();
    simd_limit = enable ? LMB_SIMD_AVX512 : LMB_SIMD_PORTABLE;
    return old;
}

int lmb_simd_cpu_level(void) {
    int bits = cpu_features();
    return (bits & CPU_AVX512) ? LMB_SIMD_AVX512
           : (bits & CPU_AVX2) ? LMB_SIMD_AVX2
                               : LMB_SIMD_PORTABLE;
}

int lmb_set_simd_level(int level) {
    int old = lmb_simd_level();
    simd_limit = clamp_level(level);
    return old;
}

int lmb_simd_level(void) {
    int cpu = lmb_simd_cpu_level();
    return simd_limit < cpu ? simd_limit : cpu;
}

int lmb_simd_active(void) {
    return lmb_simd_level() >= LMB_SIMD_AVX2;
}
