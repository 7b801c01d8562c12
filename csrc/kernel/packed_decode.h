/* packed_decode.h: decoding one chunk of a packed clip (packed.h) as a
 * template, compiled twice: portable (packed.c) and with AVX2 + FMA
 * (x86/packed_avx2.c). Define PK(name) before including. Each stream finds
 * its two keys and factor from the frame position in O(1); every row is
 * dequantized for the chunk's 8 joints at once (one vector per row). */
#include "clip.h" /* LMB_NLERP_DOT */
#include "packed.h"
#include "qpoly.h"
#include "vec8.h"

#include <math.h>
#include <string.h>

#ifndef LIMBER_PACKED_INV
#define LIMBER_PACKED_INV
/* 1 / n for the steps of a stream (n <= LMB_PK_MAX_STEP): rounded up where
 * inexact, so floor(pos / step) is never one short at a key (one over
 * happens only a rounding below a key, where both keys give one value) */
static const float lmb_pk_inv[LMB_PK_MAX_STEP + 1] = {
    0.0f,         1.0f,         0.5f,         0.33333334f,  0.25f,        0.2f,
    0.16666667f,  0.14285715f,  0.125f,       0.11111112f,  0.1f,         0.09090909f,
    0.083333336f, 0.07692308f,  0.071428575f, 0.06666667f,  0.0625f,      0.05882353f,
    0.055555556f, 0.05263158f,  0.05f,        0.04761905f,  0.045454547f, 0.04347826f,
    0.041666668f, 0.04f,        0.03846154f,  0.037037037f, 0.035714287f, 0.03448276f,
    0.033333335f, 0.032258064f, 0.03125f};
#endif

static inline lmb_v8f PK(ld)(const void *p) {
    lmb_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline lmb_v8f PK(splat)(float x) {
    lmb_v8f v = {x, x, x, x, x, x, x, x};
    return v;
}
/* sqrt per lane of x >= 0 (the loop vectorises: one instruction) */
static inline lmb_v8f PK(sqrtv)(lmb_v8f x) {
    float in[8], out[8];
    memcpy(in, &x, sizeof in);
    for (int l = 0; l < 8; l++)
        out[l] = sqrtf(in[l]);
    return PK(ld)(out);
}
static inline lmb_v8f PK(maxv)(lmb_v8f x, float m) {
    lmb_v8i k = x > m;
    return (lmb_v8f)(((lmb_v8i)x & k) | ((lmb_v8i)PK(splat)(m) & ~k));
}
/* acos(x), x in [0, 1], and sin(y), y in [0, pi/2]: qpoly.h's polynomials */
static inline lmb_v8f PK(acosv)(lmb_v8f x) {
    lmb_v8f p = PK(splat)(lmb_acos_coef[LMB_ACOS_DEGREE]);
    for (int k = LMB_ACOS_DEGREE - 1; k >= 0; k--)
        p = p * x + lmb_acos_coef[k];
    return PK(sqrtv)(PK(maxv)(1.0f - x, 0.0f)) * p;
}
static inline lmb_v8f PK(sinv)(lmb_v8f y) {
    lmb_v8f y2 = y * y, p = PK(splat)(lmb_sin_coef[LMB_SIN_TERMS - 1]);
    for (int k = LMB_SIN_TERMS - 2; k >= 0; k--)
        p = p * y2 + lmb_sin_coef[k];
    return y + y * y2 * p;
}

/* Key of stream s before frame position pos and the factor to the next;
 * hint: the key used last (irregular keys: checked first). */
static inline uint32_t PK(key)(const lmb_packed *p, const lmb_pstream *s, float pos, uint32_t hint,
                               float *al) {
    if (s->keys < 2) {
        *al = 0.0f;
        return 0;
    }
    uint32_t a, span;
    float lo;
    if (s->step) {
        uint32_t k = s->step;
        a = (uint32_t)(pos * lmb_pk_inv[k]);
        if (a > s->keys - 2) a = s->keys - 2;
        uint32_t first = a * k, hi = first + k < p->frames - 1 ? first + k : p->frames - 1;
        lo = (float)first, span = hi - first;
    } else {
        const uint16_t *fr = p->keyframes + s->kf;
        uint32_t m = s->keys;
        /* key frames are integers: fr <= pos is fr <= floor(pos) (pos < 0 or
         * NaN: 0, which only frame 0 is at or below) */
        uint32_t fi = pos > 0.0f ? (pos < 65536.0f ? (uint32_t)pos : 65536u) : 0u;
        a = hint < m - 1 ? hint : m - 2;
        if (!(fi >= fr[a] && (fi < fr[a + 1] || a == m - 2))) {
            uint32_t base = 0, n = m - 1; /* the last a in [0, m - 2] with fr[a] <= pos */
            while (n > 1) {
                uint32_t half = n / 2;
                if (fr[base + half] <= fi) base += half;
                n -= half;
            }
            a = base;
        }
        lo = (float)fr[a], span = (uint32_t)fr[a + 1] - fr[a];
    }
    float f = (pos - lo) * (span <= LMB_PK_MAX_STEP ? lmb_pk_inv[span] : 1.0f / (float)span);
    f = f > 0.0f ? (f < 1.0f ? f : 1.0f) : 0.0f;
    if (p->interp == 0) f = f >= 1.0f ? 1.0f : 0.0f; /* STEP */
    *al = f;
    return a;
}

/* w >= 0 of a unit quaternion from its x y z: sqrt(1 - x^2 - y^2 - z^2)
 * (or any component from the other three: DERIVE_ANY).
 * Near w = 0 this keeps few of w's bits and amplifies any rounding of x y z
 * by about 1 / w, so every decoder must compute the same floats: the files
 * that include this one are compiled without contraction into FMAs
 * (CMakeLists.txt, packed_avx2.c), and the sampler's keys equal the
 * compressor's measure bit for bit. */
static inline lmb_v8f PK(derive_w)(lmb_v8f x, lmb_v8f y, lmb_v8f z) {
    return PK(sqrtv)(PK(maxv)(1.0f - (x * x + y * y + z * z), 0.0f));
}

#ifdef PK_AVX2_ROWS
/* Joint l's wv[l] bits from bit off[l] of the 16 bytes at r (each joint's
 * four bytes from its first one by a byte shuffle, then a shift per lane),
 * as base + scale * q. */
static inline lmb_v8f PK(row_lanes)(const uint8_t *r, const float *base, __m256i wv, __m256i off) {
    const __m256i byte0 = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                           0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    __m256i ctrl = _mm256_add_epi8(_mm256_shuffle_epi8(_mm256_srli_epi32(off, 3), byte0),
                                   _mm256_set1_epi32(0x03020100));
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)r));
    __m256i x = _mm256_srlv_epi32(_mm256_shuffle_epi8(both, ctrl),
                                  _mm256_and_si256(off, _mm256_set1_epi32(7)));
    __m256i mask =
        _mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), wv), _mm256_set1_epi32(1));
    x = _mm256_and_si256(x, mask);
    return (lmb_v8f)_mm256_add_ps(_mm256_loadu_ps(base),
                                  _mm256_mul_ps(_mm256_loadu_ps(base + 8), _mm256_cvtepi32_ps(x)));
}

/* Bit offsets of the joints of a row whose joint l takes wv[l] bits, one
 * after the other: the running sum of the widths before each lane (two
 * in-lane shifts, the low half's total added to the high half). */
static inline __m256i PK(offsets)(__m256i wv) {
    __m256i inc = _mm256_add_epi32(wv, _mm256_slli_si256(wv, 4));
    inc = _mm256_add_epi32(inc, _mm256_slli_si256(inc, 8));
    inc = _mm256_add_epi32(
        inc, _mm256_blend_epi32(_mm256_setzero_si256(),
                                _mm256_permutevar8x32_epi32(inc, _mm256_set1_epi32(3)), 0xF0));
    return _mm256_sub_epi32(inc, wv);
}

/* The widths b of a row's joints, 0 for the lanes in `skip`. */
static inline __m256i PK(kept_widths)(__m256i bv, uint32_t skip) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i skipped =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)skip), lane),
                                            _mm256_set1_epi32(1)),
                           _mm256_set1_epi32(1));
    return _mm256_andnot_si256(skipped, bv);
}

/* A row of b <= 14 bits per joint, no lane skipped, with one 16-byte load
 * (the row and what follows it: r + 16 must not pass the data's end). The
 * same q, and the same base + scale * q (no FMA), as the scalar path below. */
static inline lmb_v8f PK(row_bits)(uint32_t b, const uint8_t *r, const float *base) {
    __m256i bv = _mm256_set1_epi32((int)b);
    return PK(row_lanes)(r, base, bv,
                         _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), bv));
}
#endif

/* Row values of one key record: base + scale * q, or the stored floats;
 * lanes in `skip` store no bits (q = 0). end: the data's end, read padding
 * included. */
static inline __attribute__((always_inline)) lmb_v8f
PK(row)(uint32_t kind, uint32_t skip, const uint8_t *r, const float *base, const uint8_t *end) {
    (void)end;
    if (kind == LMB_PK_F32) return PK(ld)(r);
#ifdef PK_AVX2_ROWS
    if (!skip && kind <= LMB_PK_Q(14) && kind != LMB_PK_U8 && end - r >= 16)
        return PK(row_bits)(kind - 16u, r, base);
    if (skip && kind <= LMB_PK_Q(14) && end - r >= 16) { /* as the loop below, 8 lanes at once */
        __m256i wv = PK(kept_widths)(_mm256_set1_epi32((int)(kind - 16u)), skip);
        return PK(row_lanes)(r, base, wv, PK(offsets)(wv));
    }
#endif
    if (skip) { /* the stored lanes' bits one after the other, low bit first */
        uint32_t b = kind - 16u, bit = 0;
        lmb_v8u32 w;
        for (uint32_t l = 0; l < 8; l++) {
            uint32_t x = 0;
            if (!(skip >> l & 1u)) {
                memcpy(&x, r + (bit >> 3), 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
                x = __builtin_bswap32(x);
#endif
                x >>= bit & 7u;
                bit += b;
            }
            w[l] = x;
        }
        lmb_v8u32 q = w & ((1u << b) - 1u);
        return PK(ld)(base) + PK(ld)(base + 8) * __builtin_convertvector((lmb_v8i)q, lmb_v8f);
    }
    if (kind == LMB_PK_U8) {
        lmb_v8u8 b;
        memcpy(&b, r, sizeof b);
        return PK(ld)(base) + PK(ld)(base + 8) * __builtin_convertvector(b, lmb_v8f);
    }
    if (kind == LMB_PK_U16) {
        lmb_v8u16 b;
        memcpy(&b, r, sizeof b);
        return PK(ld)(base) + PK(ld)(base + 8) * __builtin_convertvector(b, lmb_v8f);
    }
    /* b bits per joint, low bit first: each joint's bits lie in the four
     * bytes from its first one (the data is followed by 4 bytes of padding) */
    uint32_t b = kind - 16u;
    lmb_v8u32 w, sh;
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t bit = l * b, x;
        memcpy(&x, r + (bit >> 3), 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap32(x);
#endif
        w[l] = x, sh[l] = bit & 7u;
    }
    lmb_v8u32 q = (w >> sh) & ((1u << b) - 1u);
    return PK(ld)(base) + PK(ld)(base + 8) * __builtin_convertvector((lmb_v8i)q, lmb_v8f);
}

/* A V row (packed.h: a width per joint) of one key record, `bits` in all
 * (lmb_pk_var_bits). Each joint's bits lie in the four bytes from its
 * first one (the data is followed by 4 bytes of padding). */
static inline __attribute__((always_inline)) lmb_v8f
PK(row_var)(uint32_t kind, uint32_t skip, const uint8_t *r, const float *base, const uint8_t *end,
            uint32_t bits) {
    (void)end, (void)bits;
#ifdef PK_AVX2_ROWS
    if (!skip && bits <= 96u && end - r >= 16) {
        /* no lane skipped: the eight 3-bit reductions spread to bytes (fields
         * to dword halves, pairs to 16-bit units, then to bytes), their
         * running sums by one multiplication (at most 49: no carries), both
         * widened to a lane each; offset of joint l: l b - the reductions
         * before it */
        uint64_t x = (uint32_t)base[16];
        uint64_t h = (x & 0xFFFu) | (x & 0xFFF000u) << 20;
        uint64_t u = (h & 0x0000003F0000003Full) | (h & 0x00000FC000000FC0ull) << 10;
        uint64_t red = (u & 0x0007000700070007ull) | (u & 0x0038003800380038ull) << 5;
        uint64_t before = red * 0x0101010101010100ull;
        __m256i bv = _mm256_set1_epi32((int)(kind - 32u));
        __m256i wv = _mm256_sub_epi32(bv, _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)red)));
        __m256i off =
            _mm256_sub_epi32(_mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), bv),
                             _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)before)));
        return PK(row_lanes)(r, base, wv, off);
    }
    /* widths from the reduction word, their running sum by two in-lane
     * shifts and the low half's total added to the high half; when every
     * joint's four bytes lie in the 16 from r (and those in the data and
     * its padding), one load and a byte shuffle give each joint its bytes */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i red =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(uint32_t)base[16]),
                                           _mm256_mullo_epi32(lane, _mm256_set1_epi32(3))),
                         _mm256_set1_epi32(7));
    __m256i wv = PK(kept_widths)(
        _mm256_max_epi32(_mm256_sub_epi32(_mm256_set1_epi32((int)(kind - 32u)), red),
                         _mm256_setzero_si256()),
        skip);
    if (bits <= 96u && end - r >= 16) return PK(row_lanes)(r, base, wv, PK(offsets)(wv));
#endif
    uint32_t w[8], bit = 0;
    lmb_pk_var_widths(kind, skip, base[16], w);
    lmb_v8u32 q;
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t x = 0;
        if (w[l]) {
            memcpy(&x, r + (bit >> 3), 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            x = __builtin_bswap32(x);
#endif
            x = x >> (bit & 7u) & ((1u << w[l]) - 1u);
            bit += w[l];
        }
        q[l] = x;
    }
    return PK(ld)(base) + PK(ld)(base + 8) * __builtin_convertvector((lmb_v8i)q, lmb_v8f);
}

/* A rotation's row 3 when it is derived: w from the other three, or for
 * DERIVE_ANY (its word: two bits per joint naming the derived component)
 * the component each joint left out, rows 0 .. 2 then being the other three
 * in order. */
static inline __attribute__((always_inline)) void PK(derive)(const lmb_pstream *s,
                                                             const float *word, lmb_v8f *v) {
    if (s->kind[3] == LMB_PK_DERIVE) v[3] = PK(derive_w)(v[0], v[1], v[2]);
    if (word) {
        uint32_t w = (uint32_t)*word;
        lmb_v8i idx;
        for (int l = 0; l < 8; l++)
            idx[l] = (int32_t)(w >> (2 * l) & 3u);
        lmb_v8i m0 = idx == 0, m1 = idx == 1, m2 = idx == 2, m3 = idx == 3;
        lmb_v8i qa = (lmb_v8i)v[0], qb = (lmb_v8i)v[1], qc = (lmb_v8i)v[2];
        lmb_v8i d = (lmb_v8i)PK(derive_w)(v[0], v[1], v[2]);
        v[0] = (lmb_v8f)((d & m0) | (qa & ~m0));
        v[1] = (lmb_v8f)((qa & m0) | (d & m1) | (qb & ~(m0 | m1)));
        v[2] = (lmb_v8f)((qb & (m0 | m1)) | (d & m2) | (qc & m3));
        v[3] = (lmb_v8f)((d & m3) | (qc & ~m3));
    }
}

/* Rows [0, n) of stream s at key a into v, and when vb is not NULL (a
 * constant at each call) at key a + 1 into vb, in one pass over the rows:
 * both keys' records share the row kinds, ranges and bit offsets, so a
 * seek decodes its two keys for little more than one (fill: the value of
 * SKIP rows). Each key's values are those of a pass for that key alone. */
static inline __attribute__((always_inline)) void PK(key_rows)(const lmb_packed *p,
                                                               const lmb_pstream *s, uint32_t a,
                                                               int n, const float *fill, lmb_v8f *v,
                                                               lmb_v8f *vb) {
    const uint8_t *ra = p->data + s->data + (size_t)a * s->rec;
    const size_t rec = s->rec;                        /* key a + 1's record: rec bytes on */
    const uint8_t *end = p->data + p->data_bytes + 4; /* the read padding */
    const float *rg = p->ranges + s->range, *word = NULL;
    for (int r = 0; r < n; r++) {
        uint8_t kind = s->kind[r];
        if (kind == LMB_PK_DERIVE_ANY) { /* its word: the derived components */
            v[r] = PK(splat)(fill[r]);
            word = rg;
            rg += 1;
        } else if (kind == LMB_PK_SKIP || kind == LMB_PK_DERIVE) {
            v[r] = PK(splat)(fill[r]);
        } else if (kind == LMB_PK_SAME) { /* row 0's values (only rows 1, 2 of T and S) */
            v[r] = v[0];
            if (vb) vb[r] = vb[0];
            continue;
        } else if (kind == LMB_PK_CONST) {
            v[r] = PK(ld)(rg);
            rg += 8;
        } else if (lmb_pk_var(kind)) {
            uint32_t bits = lmb_pk_var_bits(kind, s->skip, rg[16]);
            v[r] = PK(row_var)(kind, s->skip, ra, rg, end, bits);
            if (vb) vb[r] = PK(row_var)(kind, s->skip, ra + rec, rg, end, bits);
            ra += (bits + 7u) / 8u;
            rg += 17;
            continue;
        } else {
            v[r] = PK(row)(kind, s->skip, ra, rg, end);
            if (vb) vb[r] = PK(row)(kind, s->skip, ra + rec, rg, end);
            ra += lmb_pk_row_bytes(kind, s->skip, rg);
            rg += lmb_pk_range_floats(kind);
            continue;
        }
        if (vb) vb[r] = v[r]; /* rows without bits: the same at every key */
    }
    if (n == 4) {
        PK(derive)(s, word, v);
        if (vb) PK(derive)(s, word, vb);
    }
}

static const float PK(fill)[3][4] = {{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 1, 1, 1}};

/* r = the value between keys va and vb at factor al: lerp (T, S) or
 * slerp on the shorter arc (R, glTF's rule, as the dense form does: lerp
 * weights where the keys are close, else sin((1 - a) theta) and
 * sin(a theta) without the common 1 / sin(theta), then normalised). */
static inline __attribute__((always_inline)) void
PK(interp)(int ch, const lmb_v8f *va, const lmb_v8f *vb, float al, lmb_v8f *r) {
    if (ch != 1) {
        for (int m = 0; m < 3; m++)
            r[m] = va[m] + (vb[m] - va[m]) * al;
        return;
    }
    lmb_v8f dot = va[0] * vb[0] + va[1] * vb[1] + va[2] * vb[2] + va[3] * vb[3];
    lmb_v8i neg = (dot < 0.0f) & (lmb_v8i){INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                                           INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN};
    lmb_v8f wa = PK(splat)(1.0f - al), wb = PK(splat)(al);
    if (al != 0.0f && al != 1.0f) {
        lmb_v8f x = (lmb_v8f)((lmb_v8i)dot & (lmb_v8i){INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX,
                                                       INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX});
        lmb_v8i far = x <= LMB_NLERP_DOT;
        uint64_t w[4];
        memcpy(w, &far, sizeof w);
        if (w[0] | w[1] | w[2] | w[3]) {
            /* qpoly.h's near-key polynomial; acos and sin where keys are
             * further apart (weights up to a common factor per joint) */
            float ka[4], kb[4];
            lmb_slerp_near_coef(1.0f - al, ka);
            lmb_slerp_near_coef(al, kb);
            lmb_v8f u = 1.0f - x;
            lmb_v8f sa = ka[0] + u * (ka[1] + u * (ka[2] + u * ka[3]));
            lmb_v8f sb = kb[0] + u * (kb[1] + u * (kb[2] + u * kb[3]));
            lmb_v8i wide = u > LMB_SLERP_NEAR_U;
            memcpy(w, &wide, sizeof w);
            if (w[0] | w[1] | w[2] | w[3]) {
                lmb_v8f th = PK(acosv)(x);
                lmb_v8f ea = PK(sinv)(th * (1.0f - al)), eb = PK(sinv)(th * al);
                sa = (lmb_v8f)(((lmb_v8i)ea & wide) | ((lmb_v8i)sa & ~wide));
                sb = (lmb_v8f)(((lmb_v8i)eb & wide) | ((lmb_v8i)sb & ~wide));
            }
            wa = (lmb_v8f)(((lmb_v8i)sa & far) | ((lmb_v8i)wa & ~far));
            wb = (lmb_v8f)(((lmb_v8i)sb & far) | ((lmb_v8i)wb & ~far));
        }
    }
    wb = (lmb_v8f)((lmb_v8i)wb ^ neg);
    for (int m = 0; m < 4; m++)
        r[m] = va[m] * wa + vb[m] * wb;
    /* lanes whose keys cancel (never for stored unit keys) get zeros, not NaN */
    lmb_v8f len2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3];
    lmb_v8i ok = len2 > 1e-30f;
    lmb_v8f iv = (lmb_v8f)((lmb_v8i)(1.0f / PK(sqrtv)(PK(maxv)(len2, 1e-30f))) & ok);
    for (int m = 0; m < 4; m++)
        r[m] *= iv;
}

/* Whether stream s (channel ch) is one key whose stored values are the
 * result: a translation or scale (interpolating one key with itself gives
 * the same value), or a rotation every row of which is SKIP (the identity).
 * Other one-key rotations are still renormalised: their rows may be
 * quantized, derived or (in a snapshot from elsewhere) not unit. */
static inline int PK(as_stored)(const lmb_pstream *s, int ch) {
    if (s->keys > 1) return 0;
    if (ch != 1) return 1;
    for (int r = 0; r < 4; r++)
        if (s->kind[r] != LMB_PK_SKIP) return 0;
    return 1;
}

/* Stream s (channel ch: 0 T, 1 R, 2 S) at frame position pos: r[m] holds
 * row m for the chunk's 8 joints. */
static inline void PK(stream)(const lmb_packed *p, const lmb_pstream *s, int ch, float pos,
                              lmb_v8f *r) {
    int n = ch == 1 ? 4 : 3;
    if (PK(as_stored)(s, ch)) {
        PK(key_rows)(p, s, 0, n, PK(fill)[ch], r, NULL);
        return;
    }
    float al;
    uint32_t a = PK(key)(p, s, pos, 0, &al);
    lmb_v8f va[4], vb[4];
    if (s->keys > 1) {
        PK(key_rows)(p, s, a, n, PK(fill)[ch], va, vb);
    } else {
        PK(key_rows)(p, s, a, n, PK(fill)[ch], va, NULL);
        for (int m = 0; m < n; m++)
            vb[m] = va[m];
    }
    PK(interp)(ch, va, vb, al, r);
}

static const int PK(first)[3] = {0, 3, 7};

/* Chunk q at frame position pos: out[c * cstride + j] (packed.h). */
static inline void PK(chunk_impl)(const lmb_packed *p, uint32_t q, float pos, float *out,
                                  uint32_t cstride) {
    const lmb_pstream *st = p->streams + (size_t)q * 3;
    for (int ch = 0; ch < 3; ch++) {
        lmb_v8f r[4];
        PK(stream)(p, st + ch, ch, pos, r);
        for (int m = 0; m < (ch == 1 ? 4 : 3); m++)
            memcpy(out + (size_t)(PK(first)[ch] + m) * cstride, &r[m], sizeof r[m]);
    }
}

/* One stream's part of a chunk's key cache (LMB_PK_CACHE_FLOATS per chunk,
 * all zero = empty; *tag: the cached key a + 1): its keys a and b at pos,
 * decoded only when the key interval changes (a one-key stream: its key as
 * both, once; one interval forward or backward, as in play and reverse
 * play: one key, the other kept), and the factor between them into *al. */
static inline __attribute__((always_inline)) void
PK(stream_keys)(const lmb_packed *p, const lmb_pstream *s, const int ch, float pos, float *cache,
                uint32_t *tag, float *al) {
    const int n = ch == 1 ? 4 : 3, f0 = ch == 0 ? 0 : ch == 1 ? 3 : 7;
    float *ca = cache + f0 * 8, *cb = cache + 80 + f0 * 8;
    uint32_t a = PK(key)(p, s, pos, *tag ? *tag - 1 : 0, al);
    if (*tag == a + 1) return;
    lmb_v8f va[4], vb[4];
    if (s->keys <= 1) {
        PK(key_rows)(p, s, a, n, PK(fill)[ch], va, NULL);
        for (int m = 0; m < n; m++)
            vb[m] = va[m];
    } else if (a > 0 && *tag == a) { /* one key forward: the old b is the new a */
        for (int m = 0; m < n; m++)
            va[m] = PK(ld)(cb + m * 8);
        PK(key_rows)(p, s, a + 1, n, PK(fill)[ch], vb, NULL);
    } else if (*tag == a + 2) { /* one key backward (play in reverse): the old a is the new b */
        for (int m = 0; m < n; m++)
            vb[m] = PK(ld)(ca + m * 8);
        PK(key_rows)(p, s, a, n, PK(fill)[ch], va, NULL);
    } else { /* a seek: both keys in one pass */
        PK(key_rows)(p, s, a, n, PK(fill)[ch], va, vb);
    }
    for (int m = 0; m < n; m++) {
        memcpy(ca + m * 8, &va[m], sizeof va[m]);
        memcpy(cb + m * 8, &vb[m], sizeof vb[m]);
    }
    *tag = a + 1;
}

/* PK(stream) through the key cache (stream_keys), so forward play mostly
 * interpolates cached floats. Results equal PK(stream)'s (decoding a key is
 * a pure function). */
static inline __attribute__((always_inline)) void PK(cached_interp)(const lmb_pstream *s,
                                                                    const int ch, float al,
                                                                    const float *cache, float *out,
                                                                    uint32_t cstride) {
    const int n = ch == 1 ? 4 : 3, f0 = ch == 0 ? 0 : ch == 1 ? 3 : 7;
    lmb_v8f va[4], vb[4], r[4];
    for (int m = 0; m < n; m++)
        va[m] = PK(ld)(cache + (f0 + m) * 8), vb[m] = PK(ld)(cache + 80 + (f0 + m) * 8);
    const lmb_v8f *res = va;
    if (!PK(as_stored)(s, ch)) {
        PK(interp)(ch, va, vb, al, r);
        res = r;
    }
    for (int m = 0; m < n; m++)
        memcpy(out + (size_t)(f0 + m) * cstride, &res[m], sizeof res[m]);
}

static inline __attribute__((always_inline)) void
PK(cached_stream)(const lmb_packed *p, const lmb_pstream *s, const int ch, float pos, float *cache,
                  uint32_t *tag, float *out, uint32_t cstride) {
    float al;
    PK(stream_keys)(p, s, ch, pos, cache, tag, &al);
    PK(cached_interp)(s, ch, al, cache, out, cstride);
}

/* stream_keys with stream ch's tag (cache[160 + ch]) read and written on
 * its own: a 12-byte copy of the three tags through the stack was read
 * back 8 bytes at a time over two 4-byte stores, which store forwarding
 * cannot serve (10% of chunk_keys_impl's time in a profile). */
static inline __attribute__((always_inline)) void PK(tagged_keys)(const lmb_packed *p,
                                                                  const lmb_pstream *s,
                                                                  const int ch, float pos,
                                                                  float *cache, float *al) {
    uint32_t tag;
    memcpy(&tag, cache + 160 + ch, sizeof tag);
    PK(stream_keys)(p, s, ch, pos, cache, &tag, al);
    memcpy(cache + 160 + ch, &tag, sizeof tag);
}

/* Chunk q's keys at pos for an interpolation by the caller: the cache then
 * holds every stream's key a (cache[0 .. 80)) and key b (cache[80 .. 160))
 * in the dense frames' layout (component-major, 8 joints), and al[0 .. 3)
 * the T, R and S factors (0 for one-key streams). Interpolating them as the
 * dense path does (lerp; slerp on the shorter arc, normalised) gives
 * chunk_cached_impl's values within float rounding (a skipped stream: its
 * fill values, which samplers overwrite with the rest pose). */
static inline void PK(chunk_keys_impl)(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                       float *al) {
    const lmb_pstream *st = p->streams + (size_t)q * 3;
    PK(tagged_keys)(p, st, 0, pos, cache, al);
    PK(tagged_keys)(p, st + 1, 1, pos, cache, al + 1);
    PK(tagged_keys)(p, st + 2, 2, pos, cache, al + 2);
}

/* The same through an instance's cache of decoded keys
 * (LMB_PK_CACHE_FLOATS per chunk, all zero = empty): a stream decodes its
 * keys only when its key interval changes, so forward play mostly
 * interpolates cached floats; the cached key is also where irregular keys
 * are looked up from. Results equal chunk_impl's (decoding a key is a pure
 * function). */
static inline void PK(chunk_cached_impl)(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                         float *out, uint32_t cstride) {
    const lmb_pstream *st = p->streams + (size_t)q * 3;
    float al[3];
    PK(chunk_keys_impl)(p, q, pos, cache, al);
    /* one call per channel, the channel a constant (interp specialises on it) */
    PK(cached_interp)(st, 0, al[0], cache, out, cstride);
    PK(cached_interp)(st + 1, 1, al[1], cache, out, cstride);
    PK(cached_interp)(st + 2, 2, al[2], cache, out, cstride);
}
