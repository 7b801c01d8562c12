/* limber.c: status strings, error records and CPU feature dispatch. */
#include "limber.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

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

void lmb_error_clear(lmb_error *e) {
    memset(e, 0, sizeof *e);
}

lmb_status lmb_error_set(lmb_error *e, lmb_status code, const char *field, const char *detail,
                         uint32_t index, uint32_t index2, double value, double limit) {
    e->code = code;
    e->field = field;
    e->detail = detail;
    e->index = index;
    e->index2 = index2;
    e->value = value;
    e->limit = limit;
    e->context[0] = '\0';
    return code;
}

/* Appends text to buf[*len ..] within n bytes, counting what did not fit. */
static void put_text(char *buf, size_t n, size_t *len, const char *s, size_t k) {
    if (*len < n) {
        size_t room = n - *len - 1; /* keep the terminator */
        memcpy(buf + *len, s, k < room ? k : room);
    }
    *len += k;
}

static void put_number(char *buf, size_t n, size_t *len, double v) {
    char tmp[40];
    int k;
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e18)
        k = snprintf(tmp, sizeof tmp, "%.0f", v);
    else
        k = snprintf(tmp, sizeof tmp, "%.9g", v);
    put_text(buf, n, len, tmp, k > 0 ? (size_t)k : 0);
}

size_t lmb_error_format(const lmb_error *e, char *buf, size_t n) {
    size_t len = 0;
    const char *t = e->detail ? e->detail : lmb_strerror(e->code);
    while (*t) {
        const char *open = strchr(t, '{');
        if (!open) {
            put_text(buf, n, &len, t, strlen(t));
            break;
        }
        put_text(buf, n, &len, t, (size_t)(open - t));
        char key = open[1];
        if (key != '\0' && open[2] == '}') {
            const char *s = NULL;
            switch (key) {
            case 'f':
                s = e->field ? e->field : "";
                break;
            case 'c':
                s = e->context;
                break;
            case 'i':
                put_number(buf, n, &len, (double)e->index + 1.0);
                break;
            case 'j':
                put_number(buf, n, &len, (double)e->index2 + 1.0);
                break;
            case 'v':
                put_number(buf, n, &len, e->value);
                break;
            case 'l':
                put_number(buf, n, &len, e->limit);
                break;
            default:
                put_text(buf, n, &len, open, 3);
            }
            if (s) put_text(buf, n, &len, s, strlen(s));
            t = open + 3;
        } else {
            put_text(buf, n, &len, "{", 1);
            t = open + (key == '{' ? 2 : 1);
        }
    }
    if (n > 0) buf[len < n ? len : n - 1] = '\0';
    return len;
}

/* CPU features, detected once per process. Two states may open the module
 * at the same time on two threads: the answer is computed by whichever
 * thread comes first (possibly by both, with the same result) and
 * published with atomic operations, so no thread reads a half-written
 * cache. Bits: CPU_KNOWN | CPU_AVX2 | CPU_AVX512 | CPU_HALF512. */
enum { CPU_KNOWN = 1, CPU_AVX2 = 2, CPU_AVX512 = 4, CPU_HALF512 = 8 };
static int cpu_bits;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* AMD family 19h (Zen 3 and Zen 4; only Zen 4 has AVX-512) executes a
 * 512-bit operation as two 256-bit halves: the AVX-512 skinning kernel
 * measured 0.87x the AVX2 kernel's speed on an EPYC of that family
 * (bench_skinning, 2026-11-30), against 1.26-1.42x on an Intel Xeon. */
static int avx512_in_halves(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return 0; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 0xFu;
    if (family == 0xFu) family += (a >> 20) & 0xFFu;
    return family == 0x19u;
}
#endif

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
            bits |= CPU_AVX512 | (avx512_in_halves() ? CPU_HALF512 : 0);
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
 * a setting made in one lua_State never shows in another.
 *
 * The initial-exec model puts these 4 bytes in the static TLS block that
 * glibc keeps spare for modules loaded later, instead of a block allocated
 * by __tls_get_addr at first use: reads are a plain load from the thread
 * pointer, and nothing outlives a dlclose of the module. (LeakSanitizer's
 * exit scan crashed on the stale dynamic block of an unloaded copy: the
 * test suite loads and unloads several modules that hold this variable.) */
#if defined(__GNUC__) && defined(__ELF__) && defined(__GLIBC__) && !defined(__ANDROID__)
/* (glibc only: musl and Android's bionic refuse to dlopen a library with
 * initial-exec TLS) */
#define LMB_TLS_MODEL __attribute__((tls_model("initial-exec")))
#else
#define LMB_TLS_MODEL
#endif
static __thread int simd_limit LMB_TLS_MODEL = LMB_SIMD_DEFAULT;

static int clamp_level(int level) {
    return level < LMB_SIMD_PORTABLE  ? LMB_SIMD_PORTABLE
           : level > LMB_SIMD_DEFAULT ? LMB_SIMD_DEFAULT
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
    simd_limit = enable ? LMB_SIMD_DEFAULT : LMB_SIMD_PORTABLE;
    return old;
}

int lmb_simd_cpu_level(void) {
    int bits = cpu_features();
    return (bits & CPU_AVX512) ? LMB_SIMD_AVX512
           : (bits & CPU_AVX2) ? LMB_SIMD_AVX2
                               : LMB_SIMD_PORTABLE;
}

int lmb_simd_cpu_default(void) {
    int level = lmb_simd_cpu_level();
    return level == LMB_SIMD_AVX512 && (cpu_features() & CPU_HALF512) ? LMB_SIMD_AVX2 : level;
}

int lmb_set_simd_level(int level) {
    int old = lmb_simd_level();
    simd_limit = clamp_level(level);
    return old;
}

int lmb_simd_level(void) {
    if (simd_limit == LMB_SIMD_DEFAULT) return lmb_simd_cpu_default();
    int cpu = lmb_simd_cpu_level();
    return simd_limit < cpu ? simd_limit : cpu;
}

int lmb_simd_active(void) {
    return lmb_simd_level() >= LMB_SIMD_AVX2;
}

uint64_t lmb_hash64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t k = 0; k < n; k++) {
        h ^= p[k];
        h *= 1099511628211ull; /* the FNV 64-bit prime */
    }
    return h;
}
