/* skinning_avx512.c: the AVX-512 skinning kernel (mat4 palettes).
 *
 * Four vertices per step, one 512-bit register per blended matrix: a
 * vertex's matrix (columns c0 | c1 | c2 | c3) is the weighted sum of its
 * palette entries, one FMA per influence reading the entry (one 64-byte
 * line) from memory. The four matrices are regrouped with eight 128-bit
 * lane shuffles into C0 = (c0 of A | of B | of C | of D) ... C3, so a point
 * is C0 x + C1 y + C2 z + C3 for all four vertices with three FMAs, x y z
 * spread over each vertex's lane by in-lane permutes of one 64-byte load of
 * the four sources (float4 x y z w each). Normals and tangents use the same
 * columns and are normalised four at a time (rsqrt14 and one Newton step).
 *
 * This is the AVX2 kernel's pair scheme (skinning_avx2.c) at twice the
 * width; the arithmetic per vertex is the same sequence of operations, lane
 * by lane, so a vertex gets the same bits in any position of a step and
 * however a job is split. It differs from the AVX2 kernel only by the
 * reciprocal square root estimate (rsqrt14 against rsqrtps, both refined by
 * one Newton step): a few float ulps on normals and tangents.
 *
 * Where it pays: on CPUs that execute 512-bit FMAs at full width (two per
 * cycle on the machine the benchmark figures come from), this halves the
 * FMA and shuffle work per vertex. mat3x4 palettes go to the AVX2 kernel. */
#include "palette.h"
#include "simd.h"
#include "skinning.h"

#if LMB_HAVE_X86

#define LMB_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* Blended matrix of one vertex: J byte offsets, W weights (k > 1). */
LMB_AVX512 static ALWAYS_INLINE __m512 blend16(const char *pal, const uint32_t *J, const float *W,
                                               uint32_t k) {
    const float *P0 = (const float *)(const void *)(pal + J[0]);
    if (k == 1) return _mm512_loadu_ps(P0);
    __m512 a = _mm512_mul_ps(_mm512_set1_ps(W[0]), _mm512_loadu_ps(P0));
    for (uint32_t i = 1; i < k; i++) {
        const float *Pi = (const float *)(const void *)(pal + J[i]);
        a = _mm512_fmadd_ps(_mm512_set1_ps(W[i]), _mm512_loadu_ps(Pi), a);
    }
    return a;
}

/* Normalises the xyz of each 128-bit lane; w lanes must be 0. */
LMB_AVX512 static ALWAYS_INLINE __m512 normalize3x4(__m512 v) {
    __m512 sq = _mm512_mul_ps(v, v);
    __m512 s = _mm512_add_ps(sq, _mm512_permute_ps(sq, 0xB1));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4E));
    s = _mm512_max_ps(s, _mm512_set1_ps(1e-30f));
    __m512 y = _mm512_rsqrt14_ps(s);
    __m512 hs = _mm512_mul_ps(_mm512_set1_ps(0.5f), s);
    y = _mm512_mul_ps(y, _mm512_fnmadd_ps(hs, _mm512_mul_ps(y, y), _mm512_set1_ps(1.5f)));
    return _mm512_mul_ps(v, y);
}

/* C0 x + C1 y + C2 z for the four float4 sources in s4, with w lanes 0
 * (normals and tangents: vectors), normalised. */
LMB_AVX512 static ALWAYS_INLINE __m512 xform_vec4(__m512 C0, __m512 C1, __m512 C2, __m512 s4) {
    __m512 v = _mm512_mul_ps(C0, _mm512_permute_ps(s4, 0x00));
    v = _mm512_fmadd_ps(C1, _mm512_permute_ps(s4, 0x55), v);
    v = _mm512_fmadd_ps(C2, _mm512_permute_ps(s4, 0xAA), v);
    return normalize3x4(_mm512_maskz_mov_ps((__mmask16)0x7777, v));
}

/* Output of one stream for a step: vertex i of the step goes to d[i], or
 * without a map to d[0] + i * stride. */
typedef struct quad_out {
    float *d[4];
    size_t stride;
} quad_out;

/* Stores vertex lanes 0 .. n-1 of r: 4 floats each when `wide`, else 3.
 * `tight` (no map, consecutive vertices `stride` floats apart with stride
 * 3 or, when wide, 4) writes the step with one masked store. */
LMB_AVX512 static ALWAYS_INLINE void store_quad(__m512 r, const quad_out *o, uint32_t n, int wide,
                                                size_t tight, int MAP) {
    if (tight == 4 && wide) {
        _mm512_mask_storeu_ps(o->d[0], (__mmask16)(0xFFFFu >> (16 - 4 * n)), r);
        return;
    }
    if (tight == 3) {
        const __m512i pack =
            _mm512_set_epi32(15, 15, 15, 15, 14, 13, 12, 10, 9, 8, 6, 5, 4, 2, 1, 0);
        _mm512_mask_storeu_ps(o->d[0], (__mmask16)(0xFFFu >> (12 - 3 * n)),
                              _mm512_permutexvar_ps(pack, r));
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        __m128 x = i == 0   ? _mm512_castps512_ps128(r)
                   : i == 1 ? _mm512_extractf32x4_ps(r, 1)
                   : i == 2 ? _mm512_extractf32x4_ps(r, 2)
                            : _mm512_extractf32x4_ps(r, 3);
        float *d = MAP ? o->d[i] : o->d[0] + i * o->stride;
        if (wide)
            _mm_storeu_ps(d, x);
        else
            _mm_mask_storeu_ps(d, 0x7, x);
    }
}

typedef struct quad_ctx {
    const char *pal;
    int pos_wide, nrm_wide;
    size_t pos_tight, nrm_tight, tan_tight;
} quad_ctx;

/* Skins vertices v .. v + n - 1 (n = 1..4; lanes past n repeat vertex v's
 * matrix and read zero sources, and are not stored). sp/sn/st point at the
 * float4 sources of vertex v. */
LMB_AVX512 static ALWAYS_INLINE void quad(const quad_ctx *c, const uint32_t *J, const float *W,
                                          uint32_t k, uint32_t wk, const float *sp, const float *sn,
                                          const float *st, const quad_out *op, const quad_out *on,
                                          const quad_out *ot, uint32_t n, int P, int N, int T,
                                          int MAP) {
    const __mmask16 lanes = (__mmask16)(0xFFFFu >> (16 - 4 * n));
    __m512 MA = blend16(c->pal, J, W, k);
    __m512 MB = n > 1 ? blend16(c->pal, J + k, W + wk, k) : MA;
    __m512 MC = n > 2 ? blend16(c->pal, J + 2 * k, W + 2 * wk, k) : MA;
    __m512 MD = n > 3 ? blend16(c->pal, J + 3 * k, W + 3 * wk, k) : MA;
    __m512 t0 = _mm512_shuffle_f32x4(MA, MB, 0x44); /* A.c0 A.c1 B.c0 B.c1 */
    __m512 t1 = _mm512_shuffle_f32x4(MA, MB, 0xEE); /* A.c2 A.c3 B.c2 B.c3 */
    __m512 t2 = _mm512_shuffle_f32x4(MC, MD, 0x44);
    __m512 t3 = _mm512_shuffle_f32x4(MC, MD, 0xEE);
    __m512 C0 = _mm512_shuffle_f32x4(t0, t2, 0x88); /* c0 of A B C D */
    __m512 C1 = _mm512_shuffle_f32x4(t0, t2, 0xDD);
    __m512 C2 = _mm512_shuffle_f32x4(t1, t3, 0x88);
    __m512 C3 = _mm512_shuffle_f32x4(t1, t3, 0xDD);
    const __mmask16 W_LANES = 0x8888;
    if (P) {
        __m512 s4 = _mm512_maskz_loadu_ps(lanes, sp);
        __m512 pp = _mm512_fmadd_ps(C0, _mm512_permute_ps(s4, 0x00), C3);
        pp = _mm512_fmadd_ps(C1, _mm512_permute_ps(s4, 0x55), pp);
        pp = _mm512_fmadd_ps(C2, _mm512_permute_ps(s4, 0xAA), pp);
        pp = _mm512_mask_mov_ps(pp, W_LANES, _mm512_set1_ps(1.0f));
        store_quad(pp, op, n, c->pos_wide, c->pos_tight, MAP);
    }
    if (N) {
        __m512 nn = xform_vec4(C0, C1, C2, _mm512_maskz_loadu_ps(lanes, sn));
        store_quad(nn, on, n, c->nrm_wide, c->nrm_tight, MAP);
    }
    if (T) {
        __m512 s4 = _mm512_maskz_loadu_ps(lanes, st);
        /* w (handedness) from the source */
        __m512 tt = _mm512_mask_mov_ps(xform_vec4(C0, C1, C2, s4), W_LANES, s4);
        store_quad(tt, ot, n, 1, c->tan_tight, MAP);
    }
}

/* Where vertices v .. v + 3 of one stream go (with a map). */
LMB_AVX512 static ALWAYS_INLINE void place(quad_out *o, float *base, const uint32_t *map,
                                           uint32_t v) {
    for (uint32_t i = 0; i < 4; i++)
        o->d[i] = base + (size_t)map[v + i] * o->stride;
}

/* One straight loop over sorted vertices [lo, hi) with k influences; P N T
 * (streams written) are constants in each instantiation. */
LMB_AVX512 static ALWAYS_INLINE void group4(const lmb_skin_range *r, uint32_t k, uint32_t lo,
                                            uint32_t hi, int P, int N, int T, int MAP) {
    const lmb_skin_mesh *m = r->mesh;
    const uint32_t *J = m->jbytes + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
    static const float no_weights[1] = {1.0f}; /* k = 1 reads no weight */
    const float *W =
        k > 1 ? m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k : no_weights;
    const uint32_t wk = k > 1 ? k : 0;
    const uint32_t *map = r->map;
    quad_ctx c;
    c.pal = (const char *)r->pal;
    c.pos_wide = r->pos_wide;
    c.nrm_wide = r->nrm_wide;
    /* one masked store per step when consecutive vertices are packed */
    c.pos_tight =
        !map && (r->pos_stride == 3 || (r->pos_stride == 4 && r->pos_wide)) ? r->pos_stride : 0;
    c.nrm_tight =
        !map && (r->nrm_stride == 3 || (r->nrm_stride == 4 && r->nrm_wide)) ? r->nrm_stride : 0;
    c.tan_tight = !map && r->tan_stride == 4 ? 4 : 0;
    const float *sp = r->src_pos + (size_t)(lo - r->src_base) * 4;
    const float *sn = N ? r->src_nrm + (size_t)(lo - r->src_base) * 4 : NULL;
    const float *st = T ? r->src_tan + (size_t)(lo - r->src_base) * 4 : NULL;
    quad_out op = {{NULL}, r->pos_stride}, on = {{NULL}, r->nrm_stride},
             ot = {{NULL}, r->tan_stride};
    if (!MAP) { /* d[0] of vertex v, advanced by four per step */
        op.d[0] = P ? r->pos + (size_t)lo * op.stride : NULL;
        on.d[0] = N ? r->nrm + (size_t)lo * on.stride : NULL;
        ot.d[0] = T ? r->tan + (size_t)lo * ot.stride : NULL;
    }
    uint32_t v = lo;
    for (; v + 4 <= hi; v += 4, J += 4 * k, W += 4 * wk, sp += 16) {
        if (MAP) {
            if (P) place(&op, r->pos, map, v);
            if (N) place(&on, r->nrm, map, v);
            if (T) place(&ot, r->tan, map, v);
        }
        quad(&c, J, W, k, wk, sp, sn, st, &op, &on, &ot, 4, P, N, T, MAP);
        if (!MAP) {
            if (P) op.d[0] += 4 * op.stride;
            if (N) on.d[0] += 4 * on.stride;
            if (T) ot.d[0] += 4 * ot.stride;
        }
        if (N) sn += 16;
        if (T) st += 16;
    }
    if (v < hi) {
        uint32_t n = hi - v;
        if (MAP) {
            for (uint32_t i = 0; i < 4; i++) {
                size_t o = map[v + (i < n ? i : 0)]; /* lanes past n: never stored */
                op.d[i] = P ? r->pos + o * op.stride : NULL;
                on.d[i] = N ? r->nrm + o * on.stride : NULL;
                ot.d[i] = T ? r->tan + o * ot.stride : NULL;
            }
        }
        quad(&c, J, W, k, wk, sp, sn, st, &op, &on, &ot, n, P, N, T, MAP);
    }
}

typedef void (*group_fn)(const lmb_skin_range *r, uint32_t lo, uint32_t hi);

#define GROUP4(k, P, N, T)                                                                         \
    LMB_AVX512 static void g4_##k##P##N##T(const lmb_skin_range *r, uint32_t lo, uint32_t hi) {    \
        if (r->map)                                                                                \
            group4(r, k, lo, hi, P, N, T, 1);                                                      \
        else                                                                                       \
            group4(r, k, lo, hi, P, N, T, 0);                                                      \
    }
#define GROUP4_K(P, N, T)                                                                          \
    GROUP4(1, P, N, T) GROUP4(2, P, N, T) GROUP4(3, P, N, T) GROUP4(4, P, N, T)
GROUP4_K(0, 0, 1)
GROUP4_K(0, 1, 0)
GROUP4_K(0, 1, 1)
GROUP4_K(1, 0, 0)
GROUP4_K(1, 0, 1)
GROUP4_K(1, 1, 0)
GROUP4_K(1, 1, 1)

#define ROW4(P, N, T)                                                                              \
    { g4_1##P##N##T, g4_2##P##N##T, g4_3##P##N##T, g4_4##P##N##T }

/* table[P * 4 + N * 2 + T][k - 1] */
static const group_fn table[8][4] = {{NULL, NULL, NULL, NULL},
                                     ROW4(0, 0, 1),
                                     ROW4(0, 1, 0),
                                     ROW4(0, 1, 1),
                                     ROW4(1, 0, 0),
                                     ROW4(1, 0, 1),
                                     ROW4(1, 1, 0),
                                     ROW4(1, 1, 1)};

void lmb_skin_range_avx512(const lmb_skin_range *r) {
    if (r->layout != LMB_PALETTE_MAT4) {
        lmb_skin_range_avx2(r);
        return;
    }
    if (r->begin >= r->end) return;
    const lmb_skin_mesh *m = r->mesh;
    int flags = (r->pos ? 4 : 0) | (r->nrm ? 2 : 0) | (r->tan ? 1 : 0);
    if (!flags) return;
    for (uint32_t k = 1; k <= 4; k++) {
        uint32_t lo = m->first[k], hi = m->first[k] + m->count[k];
        if (lo < r->begin) lo = r->begin;
        if (hi > r->end) hi = r->end;
        if (lo < hi) table[flags][k - 1](r, lo, hi);
    }
}

#else

void lmb_skin_range_avx512(const lmb_skin_range *r) {
    lmb_skin_range_portable(r);
}

#endif
