/* limber.h: kernel-wide definitions shared by every csrc/ file.
 *
 * The kernel is pure C99 over flat arrays: no Lua headers, no longjmp, no
 * allocation in per-frame paths. Functions report problems through status
 * codes (lmb_status). Jobs (skinning, blending, sampling, local-to-model,
 * palettes, clip building) have a validate function that checks every rule
 * and fills one detailed lmb_error (which field, which index, what bound),
 * and a run function that cannot fail once validated. The Lua binding
 * (csrc/lua/) raises lmb_error_format()'s text, so C and Lua callers get
 * the same rules and the same wording. */
#ifndef LIMBER_H
#define LIMBER_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#define LIMBER_VERSION "0.1.0"

/* Joint indices are 16-bit. 0xFFFF marks a root ("no parent"), so a
 * skeleton has at most 65535 joints (indices 0 .. 65534). */
#define LMB_NO_PARENT 0xFFFFu
#define LMB_MAX_JOINTS 65535u

/* Pose batches process instances in blocks of LMB_LANES (the AVX2 width).
 * Instance counts are padded to a multiple of it internally. */
#define LMB_LANES 8

/* Floats per local transform in a pose: translation xyz, rotation xyzw
 * (quaternion), scale xyz. */
#define LMB_TRS_FLOATS 10

typedef enum lmb_status {
    LMB_OK = 0,
    LMB_ENOMEM,    /* allocation failed */
    LMB_ERANGE,    /* an index or count out of range */
    LMB_ECYCLE,    /* a joint is its own ancestor */
    LMB_EDUPNAME,  /* two joints share a name */
    LMB_ENAN,      /* a value is NaN or infinite */
    LMB_ESIZE,     /* buffer sizes do not match */
    LMB_EMISMATCH, /* objects do not belong together (e.g. another skeleton) */
    LMB_EINVAL     /* any other invalid argument */
} lmb_status;

const char *lmb_strerror(lmb_status s);

/* The largest magnitude a float input may have: every number the kernel
 * stores as a float must be finite and within it. */
#define LMB_FLOAT_LIMIT FLT_MAX

/* A detailed error: what a validate function (or a builder) found wrong.
 * `detail` is a static template that lmb_error_format expands:
 *     {f} field   {c} context   {i} index + 1   {j} index2 + 1
 *     {v} value   {l} limit     {{ a brace
 * Indices are 0-based in the record and written 1-based (the Lua
 * convention: the text is what Lua users read); numbers print as integers
 * when integral, else with 9 significant digits. code LMB_OK: no error. */
typedef struct lmb_error {
    lmb_status code;
    const char *field;   /* the field at fault ("stride", "weights", ...) */
    const char *detail;  /* the message template (static storage) */
    uint32_t index;      /* position of the element at fault (0-based) */
    uint32_t index2;     /* a second position (a key, another job, ...) */
    double value, limit; /* the offending value and the bound it broke */
    char context[48];    /* free text naming the object (e.g. a track) */
} lmb_error;

/* Clears an error record (code LMB_OK). */
void lmb_error_clear(lmb_error *e);

/* Fills an error record and returns its code. */
lmb_status lmb_error_set(lmb_error *e, lmb_status code, const char *field, const char *detail,
                         uint32_t index, uint32_t index2, double value, double limit);

/* Writes the message of `e` into buf (n bytes, always terminated when n >
 * 0); returns the length of the full message (as snprintf). A record
 * without a template gives lmb_strerror(code). */
size_t lmb_error_format(const lmb_error *e, char *buf, size_t n);

/* FNV-1a, 64 bits: h updated with n bytes of data (start from
 * LMB_HASH64_SEED). Used for rig hashes (the binding's skeleton:rig_hash). */
#define LMB_HASH64_SEED 14695981039346656037ull
uint64_t lmb_hash64(uint64_t h, const void *data, size_t n);

/* Rounds n up to a multiple of a (a power of two). */
static inline size_t lmb_align_up(size_t n, size_t a) {
    return (n + a - 1) & ~(a - 1);
}

/* Aligns a pointer up to a (a power of two). */
static inline void *lmb_align_ptr(void *p, size_t a) {
    return (void *)(((uintptr_t)p + a - 1) & ~(uintptr_t)(a - 1));
}

/* True when the CPU and the build allow the AVX2 + FMA kernels. */
int lmb_cpu_has_avx2(void);

/* True when the CPU and the OS allow the AVX-512 (F + VL) kernels. */
int lmb_cpu_has_avx512(void);

/* Kernel levels: portable C, AVX2 + FMA, AVX-512 (where a kernel has one;
 * others use their AVX2 kernel at that level). */
/* LMB_SIMD_DEFAULT is a cap, not a level: the level that runs fastest on
 * this CPU (lmb_simd_cpu_default), which is the best it allows except where
 * AVX-512 runs in 256-bit halves (AMD family 19h, Zen 4: there the AVX2
 * kernels are faster); a cap of LMB_SIMD_AVX512 still selects AVX-512. */
enum { LMB_SIMD_PORTABLE = 0, LMB_SIMD_AVX2 = 1, LMB_SIMD_AVX512 = 2, LMB_SIMD_DEFAULT = 3 };

/* The kernel level is a cap per thread (default: LMB_SIMD_DEFAULT),
 * never process-wide: the Lua binding keeps one setting per lua_State and
 * applies it with lmb_simd_use on the thread that runs each call and on
 * the pool workers of each job. CPU features are detected once per
 * process, thread-safely.
 *
 * Selects the kernels used by the calling thread: 1 = best available
 * (LMB_SIMD_DEFAULT, the default), 0 = portable only. Returns the previous. */
int lmb_set_simd(int enable);
int lmb_simd_active(void);

/* Caps the kernel level (LMB_SIMD_*; the CPU may allow less); returns the
 * previous effective level. lmb_simd_level: the effective level now;
 * lmb_simd_cpu_level: the best the CPU allows; lmb_simd_cpu_default: the
 * level LMB_SIMD_DEFAULT stands for on this CPU. */
int lmb_set_simd_level(int level);
int lmb_simd_level(void);
int lmb_simd_cpu_level(void);
int lmb_simd_cpu_default(void);

/* Sets the calling thread's cap (LMB_SIMD_*, clamped) without reading the
 * CPU; lmb_simd_cap returns it. */
void lmb_simd_use(int level);
int lmb_simd_cap(void);

#endif
