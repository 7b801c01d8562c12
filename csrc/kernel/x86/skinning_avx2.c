/* skinning_avx2.c: the AVX2 + FMA skinning kernel.
 *
 * mat4 palettes (the fast path): two vertices per step. A vertex's blended
 * matrix is built in two 256-bit registers, columns (0|1) and (2|3), with
 * two FMAs per influence reading the palette entry (one 64-byte line)
 * straight from memory. The two vertices' columns are then regrouped as
 * C0 = (c0 of A | c0 of B) ... C3, so a point is C0 x + C1 y + C2 z + C3
 * with x, y, z in-lane broadcasts of one 256-bit load of both sources
 * (float4 x y z w each): three FMAs for two vertices, results (A | B) ready
 * to store. Normals and tangents use the same blended matrix and are
 * normalised with rsqrt and one Newton step (a few float ulps from the
 * portable 1/sqrt), four at a time: the loop runs two pairs (a quad) per
 * step, in a software pipeline.
 *
 * mat3x4 palettes: one vertex per step, rows 0 and 1 in a 256-bit register
 * and row 2 in 128 bits (1.5 FMAs per influence), dot products finished with
 * horizontal adds. Measured slower than the mat4 path here; it exists so a
 * texture-layout palette can be skinned without a second palette.
 *
 * Every instantiation of the loops has its influence count, streams, store
 * width and layout as constants: one straight loop per influence count with
 * no branch on the count; the only run-time tests are loop-invariant (file
 * order map, width-4 streams) or the last vertex of an odd range. */
/* LMB_SKIN_V1: this file compiled a second time, into the skinning
 * benchmark's baseline module (examples/baselines/skin.c), as the kernel
 * was when issue 19 was filed: pairs one after another (no quads, no
 * software pipeline) and a normal's squares added as (x^2 + y^2) +
 * (z^2 + w^2). Its entry is then lmb_skin_range_avx2_v1. */
#ifdef LMB_SKIN_V1
#define lmb_skin_range_avx2 lmb_skin_range_avx2_v1
#define LMB_SKIN_PIPELINE 0
#else
#define LMB_SKIN_PIPELINE 1
#endif

#include "palette.h"
#include "simd.h"
#include "skinning.h"

#if LMB_HAVE_X86

#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* v * 1/|v.xyz| (lanes 0..2; lane 3 is kept as is, callers overwrite it). */
LMB_AVX2 static ALWAYS_INLINE __m128 normalize3(__m128 v) {
    __m128 s = _mm_max_ps(_mm_dp_ps(v, v, 0x7F), _mm_set1_ps(1e-30f));
    __m128 y = _mm_rsqrt_ps(s);
    /* one Newton step: y * (1.5 - 0.5 * s * y * y) */
    __m128 hs = _mm_mul_ps(_mm_set1_ps(0.5f), s);
    y = _mm_mul_ps(y, _mm_fnmadd_ps(hs, _mm_mul_ps(y, y), _mm_set1_ps(1.5f)));
    return _mm_mul_ps(v, y);
}

LMB_AVX2 static ALWAYS_INLINE void store3(float *d, __m128 v) {
    _mm_storel_pi((__m64 *)(void *)d, v);
    _mm_store_ss(d + 2, _mm_movehl_ps(v, v));
}

/* c01 * (x..., y...) + c23 * (z..., w...) folded to 128 bits, w given. */
LMB_AVX2 static ALWAYS_INLINE __m128 xform_cols(__m256 c01, __m256 c23, const float *s, __m256 w) {
    __m256 xy = _mm256_blend_ps(_mm256_broadcast_ss(s), _mm256_broadcast_ss(s + 1), 0xF0);
    __m256 zw = _mm256_blend_ps(_mm256_broadcast_ss(s + 2), w, 0xF0);
    __m256 t = _mm256_fmadd_ps(c23, zw, _mm256_mul_ps(c01, xy));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Rows r01 (rows 0, 1) and r2 applied to the 4-vector h (x y z w). */
LMB_AVX2 static ALWAYS_INLINE __m128 xform_rows(__m256 r01, __m128 r2, __m128 h) {
    __m256 a = _mm256_mul_ps(r01, _mm256_set_m128(h, h));
    __m128 b = _mm_mul_ps(r2, h);
    __m128 h1 = _mm_hadd_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 h2 = _mm_hadd_ps(b, _mm_setzero_ps());
    return _mm_hadd_ps(h1, h2);
}

/* Stores 3 floats, or 4 when `full` (the 4th float is either owned by the
 * stream or overwritten later by this thread, see lmb_skin_range.full). */
LMB_AVX2 static ALWAYS_INLINE void store_v(float *d, __m128 v, int full, int wide) {
    if (full || wide)
        _mm_storeu_ps(d, v);
    else
        store3(d, v);
}

/* One straight loop over sorted vertices [lo, hi) with k influences. The
 * flags P, N, T (streams written), FULL (16-byte stores) and ROWS (mat3x4
 * palette) are constants in every instantiation, so the loop body has no
 * branch except the optional output map. */
LMB_AVX2 static ALWAYS_INLINE void group(const lmb_skin_range *r, uint32_t k, uint32_t lo,
                                         uint32_t hi, int P, int N, int T, int FULL, int ROWS) {
    const lmb_skin_mesh *m = r->mesh;
    const float *pal = r->pal;
    const uint32_t width = ROWS ? 12 : 16;
    const uint16_t *J = m->joints + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
    const float *W = k > 1 ? m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k : NULL;
    const float *sp = r->src_pos + (size_t)(lo - r->src_base) * 4;
    const float *sn = N ? r->src_nrm + (size_t)(lo - r->src_base) * 4 : NULL;
    const float *st = T ? r->src_tan + (size_t)(lo - r->src_base) * 4 : NULL;
    const uint32_t *map = r->map;
    const size_t ps = r->pos_stride, ns = r->nrm_stride, ts = r->tan_stride;
    float *dp = P && !map ? r->pos + (size_t)lo * ps : NULL;
    float *dn = N && !map ? r->nrm + (size_t)lo * ns : NULL;
    float *dt = T && !map ? r->tan + (size_t)lo * ts : NULL;
    const __m256 one8 = _mm256_set1_ps(1.0f), zero8 = _mm256_setzero_ps();
    const __m128 one4 = _mm_set1_ps(1.0f), zero4 = _mm_setzero_ps();
    for (uint32_t v = lo; v < hi; v++, J += k, sp += 4) {
        __m256 a01,
            a23; /* mat4: columns (0|1), (2|3); mat3x4: rows (0|1), row 2 in a23's low half */
        const float *P0 = pal + (size_t)J[0] * width;
        if (k == 1) {
            a01 = _mm256_loadu_ps(P0);
            a23 = ROWS ? _mm256_castps128_ps256(_mm_loadu_ps(P0 + 8)) : _mm256_loadu_ps(P0 + 8);
        } else {
            __m256 w = _mm256_broadcast_ss(W);
            a01 = _mm256_mul_ps(w, _mm256_loadu_ps(P0));
            a23 = ROWS ? _mm256_castps128_ps256(
                             _mm_mul_ps(_mm256_castps256_ps128(w), _mm_loadu_ps(P0 + 8)))
                       : _mm256_mul_ps(w, _mm256_loadu_ps(P0 + 8));
            for (uint32_t i = 1; i < k; i++) {
                const float *Pi = pal + (size_t)J[i] * width;
                w = _mm256_broadcast_ss(W + i);
                a01 = _mm256_fmadd_ps(w, _mm256_loadu_ps(Pi), a01);
                if (ROWS)
                    a23 = _mm256_castps128_ps256(_mm_fmadd_ps(_mm256_castps256_ps128(w),
                                                              _mm_loadu_ps(Pi + 8),
                                                              _mm256_castps256_ps128(a23)));
                else
                    a23 = _mm256_fmadd_ps(w, _mm256_loadu_ps(Pi + 8), a23);
            }
            W += k;
        }
        size_t o = map ? map[v] : 0;
        if (P) {
            __m128 p = ROWS ? xform_rows(a01, _mm256_castps256_ps128(a23), _mm_load_ps(sp))
                            : xform_cols(a01, a23, sp, one8);
            p = _mm_blend_ps(p, one4, 8);
            store_v(map ? r->pos + o * ps : dp, p, FULL, r->pos_wide);
            if (!map) dp += ps;
        }
        if (N) {
            __m128 n = ROWS ? xform_rows(a01, _mm256_castps256_ps128(a23), _mm_load_ps(sn))
                            : xform_cols(a01, a23, sn, zero8);
            n = _mm_blend_ps(normalize3(n), zero4, 8);
            store_v(map ? r->nrm + o * ns : dn, n, FULL, r->nrm_wide);
            if (!map) dn += ns;
            sn += 4;
        }
        if (T) {
            __m128 src = _mm_load_ps(st);
            __m128 t =
                ROWS ? xform_rows(a01, _mm256_castps256_ps128(a23), _mm_blend_ps(src, zero4, 8))
                     : xform_cols(a01, a23, st, zero8);
            t = _mm_blend_ps(normalize3(t), src, 8); /* w (handedness) from the source */
            _mm_storeu_ps(map ? r->tan + o * ts : dt, t);
            if (!map) dt += ts;
            st += 4;
        }
    }
}

/* Blended matrix of one vertex (mat4 palette): columns (0|1) and (2|3).
 * J holds byte offsets of the palette entries (mesh->jbytes). */
LMB_AVX2 static ALWAYS_INLINE void blend_cols(const char *pal, const uint32_t *J, const float *W,
                                              uint32_t k, __m256 *c01, __m256 *c23) {
    const float *P0 = (const float *)(const void *)(pal + J[0]);
    if (k == 1) {
        *c01 = _mm256_loadu_ps(P0);
        *c23 = _mm256_loadu_ps(P0 + 8);
        return;
    }
    __m256 w = _mm256_broadcast_ss(W);
    __m256 a = _mm256_mul_ps(w, _mm256_loadu_ps(P0));
    __m256 b = _mm256_mul_ps(w, _mm256_loadu_ps(P0 + 8));
    for (uint32_t i = 1; i < k; i++) {
        const float *Pi = (const float *)(const void *)(pal + J[i]);
        w = _mm256_broadcast_ss(W + i);
        a = _mm256_fmadd_ps(w, _mm256_loadu_ps(Pi), a);
        b = _mm256_fmadd_ps(w, _mm256_loadu_ps(Pi + 8), b);
    }
    *c01 = a;
    *c23 = b;
}

/* y * (1.5 - 0.5 * s * y * y) for y = rsqrt(s): 1/sqrt(s) to a few ulps
 * (one Newton step; s at least 1e-30, so a zero vector stays zero). */
LMB_AVX2 static ALWAYS_INLINE __m256 rsqrt_newton(__m256 s) {
    s = _mm256_max_ps(s, _mm256_set1_ps(1e-30f));
    __m256 y = _mm256_rsqrt_ps(s);
    __m256 hs = _mm256_mul_ps(_mm256_set1_ps(0.5f), s);
    return _mm256_mul_ps(y, _mm256_fnmadd_ps(hs, _mm256_mul_ps(y, y), _mm256_set1_ps(1.5f)));
}

/* Normalises the xyz of both 128-bit halves; w lanes must be 0. The
 * squared length is (x^2 + z^2) + (y^2 + w^2), the grouping of
 * normalize3x4, so a vector gets the same bits from either. (The kernel
 * before the quad steps, LMB_SKIN_V1, added (x^2 + y^2) + (z^2 + w^2).) */
LMB_AVX2 static ALWAYS_INLINE __m256 normalize3x2(__m256 v) {
    __m256 sq = _mm256_mul_ps(v, v);
#if LMB_SKIN_PIPELINE
    __m256 s = _mm256_add_ps(sq, _mm256_permute_ps(sq, 0x4E));
    s = _mm256_add_ps(s, _mm256_permute_ps(s, 0xB1));
#else
    __m256 s = _mm256_add_ps(sq, _mm256_permute_ps(sq, 0xB1));
    s = _mm256_add_ps(s, _mm256_permute_ps(s, 0x4E));
#endif
    return _mm256_mul_ps(v, rsqrt_newton(s));
}

/* Normalises the four vectors in the halves of n0 (a | b) and n1 (c | d),
 * w lanes 0, with one rsqrt: unpacks put (x z) of a and c side by side
 * (likewise y w), so one add of the squares and one of their swap give
 * (|a|^2 |c|^2 |a|^2 |c|^2 | |b|^2 |d|^2 ...), each lane from its own
 * vector only. */
LMB_AVX2 static ALWAYS_INLINE void normalize3x4(__m256 *n0, __m256 *n1) {
    __m256 t0 = _mm256_unpacklo_ps(*n0, *n1), t1 = _mm256_unpackhi_ps(*n0, *n1);
    __m256 s = _mm256_add_ps(_mm256_mul_ps(t0, t0), _mm256_mul_ps(t1, t1));
    __m256 y = rsqrt_newton(_mm256_add_ps(s, _mm256_permute_ps(s, 0x4E)));
    *n0 = _mm256_mul_ps(*n0, _mm256_permute_ps(y, 0x00));
    *n1 = _mm256_mul_ps(*n1, _mm256_permute_ps(y, 0x55));
}

/* Sources of vertices v and v + 1 (or v twice): (x y z w | x y z w). */
LMB_AVX2 static ALWAYS_INLINE __m256 load2(const float *s, int two) {
    return two ? _mm256_loadu_ps(s) : _mm256_broadcast_ps((const __m128 *)(const void *)s);
}

/* C0 x + C1 y + C2 z for the two float4 sources in s2, with w lanes 0
 * (normals and tangents: vectors), not yet normalised. */
LMB_AVX2 static ALWAYS_INLINE __m256 xform_vec2(__m256 C0, __m256 C1, __m256 C2, __m256 s2) {
    __m256 v = _mm256_mul_ps(C0, _mm256_permute_ps(s2, 0x00));
    v = _mm256_fmadd_ps(C1, _mm256_permute_ps(s2, 0x55), v);
    v = _mm256_fmadd_ps(C2, _mm256_permute_ps(s2, 0xAA), v);
    return _mm256_blend_ps(v, _mm256_setzero_ps(), 0x88);
}

/* A vertex pair's results before the normalisation: positions (w = 1),
 * normals and tangents transformed (w = 0), the tangent source (its w). */
typedef struct pair_out {
    __m256 pp, nn, tt, ts;
} pair_out;

/* The blend and transforms of the vertex pair (v, v + 1), or v alone when
 * !TWO (then B = A, so a lone vertex gets the same bits as in a pair). */
LMB_AVX2 static ALWAYS_INLINE pair_out pair_xform(const char *pal, const uint32_t *J,
                                                  const float *W, uint32_t k, uint32_t wk,
                                                  const float *sp, const float *sn, const float *st,
                                                  int TWO, int P, int N, int T) {
    const __m256 one8 = _mm256_set1_ps(1.0f), zero8 = _mm256_setzero_ps();
    __m256 a01, a23, b01, b23;
    blend_cols(pal, J, W, k, &a01, &a23);
    if (TWO) {
        blend_cols(pal, J + k, W + wk, k, &b01, &b23);
    } else {
        b01 = a01;
        b23 = a23;
    }
    /* columns of both vertices: C0 = (c0 of A | c0 of B) ... */
    __m256 C0 = _mm256_permute2f128_ps(a01, b01, 0x20);
    __m256 C1 = _mm256_permute2f128_ps(a01, b01, 0x31);
    __m256 C2 = _mm256_permute2f128_ps(a23, b23, 0x20);
    __m256 C3 = _mm256_permute2f128_ps(a23, b23, 0x31);
    pair_out o = {one8, zero8, zero8, zero8};
    if (P) {
        __m256 s2 = load2(sp, TWO); /* (x y z 1 of A | of B) */
        __m256 pp = _mm256_fmadd_ps(C0, _mm256_permute_ps(s2, 0x00), C3);
        pp = _mm256_fmadd_ps(C1, _mm256_permute_ps(s2, 0x55), pp);
        pp = _mm256_fmadd_ps(C2, _mm256_permute_ps(s2, 0xAA), pp);
        o.pp = _mm256_blend_ps(pp, one8, 0x88);
    }
    if (N) o.nn = xform_vec2(C0, C1, C2, load2(sn, TWO));
    if (T) {
        o.ts = load2(st, TWO);
        o.tt = xform_vec2(C0, C1, C2, o.ts);
    }
    return o;
}

/* Normalises a pair's normals and tangents (unless NORM is 0: done
 * already) and stores its attributes:
 * vertex A's, then B's, each in P N T order. A 16-byte store may spill onto
 * a later attribute of its vertex or, at the end of an interleaved stride,
 * onto the next vertex's first attribute (what the binding allows with
 * `full`), so those must be written after it. */
LMB_AVX2 static ALWAYS_INLINE void pair_store(pair_out o, float *da_p, float *db_p, float *da_n,
                                              float *db_n, float *da_t, float *db_t, int TWO, int P,
                                              int N, int T, int WIDE_P, int WIDE_N, int NORM) {
    __m256 nn = N && NORM ? normalize3x2(o.nn) : o.nn;
    __m256 tt = o.tt;
    if (T)
        tt = _mm256_blend_ps(NORM ? normalize3x2(o.tt) : o.tt, o.ts, 0x88); /* w from the source */
    if (P) store_v(da_p, _mm256_castps256_ps128(o.pp), 0, WIDE_P);
    if (N) store_v(da_n, _mm256_castps256_ps128(nn), 0, WIDE_N);
    if (T) _mm_storeu_ps(da_t, _mm256_castps256_ps128(tt));
    if (TWO) {
        if (P) store_v(db_p, _mm256_extractf128_ps(o.pp, 1), 0, WIDE_P);
        if (N) store_v(db_n, _mm256_extractf128_ps(nn, 1), 0, WIDE_N);
        if (T) _mm_storeu_ps(db_t, _mm256_extractf128_ps(tt, 1));
    }
}

/* Skins the vertex pair (v, v + 1), or v alone when !TWO. Everything the
 * loop needs is passed in locals so the compiler keeps it in registers
 * (stores through float pointers could otherwise alias the range struct
 * and force reloads). */
LMB_AVX2 static ALWAYS_INLINE void pair(const char *pal, const uint32_t *J, const float *W,
                                        uint32_t k, uint32_t wk, const float *sp, const float *sn,
                                        const float *st, float *da_p, float *db_p, float *da_n,
                                        float *db_n, float *da_t, float *db_t, int TWO, int P,
                                        int N, int T, int WIDE_P, int WIDE_N) {
    pair_store(pair_xform(pal, J, W, k, wk, sp, sn, st, TWO, P, N, T), da_p, db_p, da_n, db_n, da_t,
               db_t, TWO, P, N, T, WIDE_P, WIDE_N, 1);
}

/* mat4 palettes, two vertices per step so the folds and the normalisation
 * work on full 256-bit registers. Same flags as group(), plus MAP (write in
 * file order through r->map) and WIDE (16-byte stores for positions and
 * normals: FULL, or the stream is 4 wide; the caller picks the instance). */
LMB_AVX2 static ALWAYS_INLINE void group2(const lmb_skin_range *r, uint32_t k, uint32_t lo,
                                          uint32_t hi, int P, int N, int T, int WP, int WN,
                                          int MAP) {
    const lmb_skin_mesh *m = r->mesh;
    const char *pal = (const char *)r->pal;
    const uint32_t *J = m->jbytes + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
    static const float no_weights[1] = {1.0f}; /* k = 1 reads no weight */
    const float *W =
        k > 1 ? m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k : no_weights;
    const uint32_t wk = k > 1 ? k : 0;
    const uint32_t *map = r->map;
    const size_t ps = r->pos_stride, ns = r->nrm_stride, ts = r->tan_stride;
    /* without a map: output pointers of vertex v, advanced by two per pair */
    float *dp = P ? r->pos + (MAP ? 0 : (size_t)lo * ps) : NULL;
    float *dn = N ? r->nrm + (MAP ? 0 : (size_t)lo * ns) : NULL;
    float *dt = T ? r->tan + (MAP ? 0 : (size_t)lo * ts) : NULL;
    const float *sp = r->src_pos + (size_t)(lo - r->src_base) * 4;
    const float *sn = N ? r->src_nrm + (size_t)(lo - r->src_base) * 4 : NULL;
    const float *st = T ? r->src_tan + (size_t)(lo - r->src_base) * 4 : NULL;
    uint32_t v = lo;
    /* Quads (two pairs) in a software pipeline: a quad's blends and
     * transforms are issued before the previous quad's normalisation and
     * stores, so the long tail of one quad (rsqrt, Newton step, stores)
     * overlaps the next quad's loads and FMAs instead of filling the
     * out-of-order window, and one rsqrt normalises the quad's four
     * normals (docs/skinning.md). The stores keep their order: vertex by
     * vertex, each in P N T order. */
    if (LMB_SKIN_PIPELINE && v + 7 < hi) {
        /* the pending quad: its streams' bases and its vertices' offsets
         * from them (in vertices: 0 1 2 3, or the map's) */
        float *bp = dp, *bn = dn, *bt = dt;
        size_t o[4] = {0, 1, 2, 3};
        pair_out pa = pair_xform(pal, J, W, k, wk, sp, sn, st, 1, P, N, T);
        pair_out pb = pair_xform(pal, J + 2 * k, W + 2 * wk, k, wk, sp + 8, N ? sn + 8 : NULL,
                                 T ? st + 8 : NULL, 1, P, N, T);
        for (;;) {
            if (MAP) {
                for (uint32_t e = 0; e < 4; e++)
                    o[e] = map[v + e];
            } else {
                bp = dp, bn = dn, bt = dt;
                if (P) dp += 4 * ps;
                if (N) dn += 4 * ns;
                if (T) dt += 4 * ts;
            }
            v += 4, J += 4 * k, W += 4 * wk, sp += 16;
            if (N) sn += 16;
            if (T) st += 16;
            const int more = v + 3 < hi;
            pair_out ca = pa, cb = pb;
            if (more) {
                ca = pair_xform(pal, J, W, k, wk, sp, sn, st, 1, P, N, T);
                cb = pair_xform(pal, J + 2 * k, W + 2 * wk, k, wk, sp + 8, N ? sn + 8 : NULL,
                                T ? st + 8 : NULL, 1, P, N, T);
            }
            if (N) normalize3x4(&pa.nn, &pb.nn);
            if (T) normalize3x4(&pa.tt, &pb.tt);
            pair_store(pa, P ? bp + o[0] * ps : NULL, P ? bp + o[1] * ps : NULL,
                       N ? bn + o[0] * ns : NULL, N ? bn + o[1] * ns : NULL,
                       T ? bt + o[0] * ts : NULL, T ? bt + o[1] * ts : NULL, 1, P, N, T, WP, WN, 0);
            pair_store(pb, P ? bp + o[2] * ps : NULL, P ? bp + o[3] * ps : NULL,
                       N ? bn + o[2] * ns : NULL, N ? bn + o[3] * ns : NULL,
                       T ? bt + o[2] * ts : NULL, T ? bt + o[3] * ts : NULL, 1, P, N, T, WP, WN, 0);
            if (!more) break;
            pa = ca, pb = cb;
        }
    }
    for (; v + 1 < hi; v += 2, J += 2 * k, W += 2 * wk, sp += 8) {
        if (MAP) {
            size_t oa = map[v], ob = map[v + 1];
            pair(pal, J, W, k, wk, sp, sn, st, P ? dp + oa * ps : NULL, P ? dp + ob * ps : NULL,
                 N ? dn + oa * ns : NULL, N ? dn + ob * ns : NULL, T ? dt + oa * ts : NULL,
                 T ? dt + ob * ts : NULL, 1, P, N, T, WP, WN);
        } else {
            pair(pal, J, W, k, wk, sp, sn, st, dp, P ? dp + ps : NULL, dn, N ? dn + ns : NULL, dt,
                 T ? dt + ts : NULL, 1, P, N, T, WP, WN);
            if (P) dp += 2 * ps;
            if (N) dn += 2 * ns;
            if (T) dt += 2 * ts;
        }
        if (N) sn += 8;
        if (T) st += 8;
    }
    if (v < hi) {
        size_t oa = MAP ? map[v] : 0;
        pair(pal, J, W, k, wk, sp, sn, st, P ? dp + oa * ps : NULL, NULL, N ? dn + oa * ns : NULL,
             NULL, T ? dt + oa * ts : NULL, NULL, 0, P, N, T, WP, WN);
    }
}

typedef void (*group_fn)(const lmb_skin_range *r, uint32_t lo, uint32_t hi);

/* mat4 instantiations: k, streams P N T, F (16-byte stores allowed), MAP. */
#define GROUP2(k, P, N, T, F, M)                                                                   \
    LMB_AVX2 static void g2_##k##P##N##T##F##M(const lmb_skin_range *r, uint32_t lo,               \
                                               uint32_t hi) {                                      \
        if (F || (r->pos_wide && r->nrm_wide))                                                     \
            group2(r, k, lo, hi, P, N, T, 1, 1, M);                                                \
        else if (r->pos_wide)                                                                      \
            group2(r, k, lo, hi, P, N, T, 1, 0, M);                                                \
        else if (r->nrm_wide)                                                                      \
            group2(r, k, lo, hi, P, N, T, 0, 1, M);                                                \
        else                                                                                       \
            group2(r, k, lo, hi, P, N, T, 0, 0, M);                                                \
    }
/* mat3x4 instantiations (one vertex per step, map tested in the loop). */
#define GROUP1(k, P, N, T, F)                                                                      \
    LMB_AVX2 static void g1_##k##P##N##T##F(const lmb_skin_range *r, uint32_t lo, uint32_t hi) {   \
        group(r, k, lo, hi, P, N, T, F, 1);                                                        \
    }
#define GROUP(k, P, N, T, F) GROUP2(k, P, N, T, F, 0) GROUP2(k, P, N, T, F, 1) GROUP1(k, P, N, T, F)
#define GROUP_K(P, N, T, F)                                                                        \
    GROUP(1, P, N, T, F) GROUP(2, P, N, T, F) GROUP(3, P, N, T, F) GROUP(4, P, N, T, F)
// one GROUP_K per line: clang-format does not lay this macro out the same way twice
// clang-format off
#define GROUP_PNT(F)                                                                               \
    GROUP_K(0, 0, 1, F)                                                                            \
    GROUP_K(0, 1, 0, F)                                                                            \
    GROUP_K(0, 1, 1, F)                                                                            \
    GROUP_K(1, 0, 0, F)                                                                            \
    GROUP_K(1, 0, 1, F)                                                                            \
    GROUP_K(1, 1, 0, F)                                                                            \
    GROUP_K(1, 1, 1, F)
// clang-format on
GROUP_PNT(0)
GROUP_PNT(1)

#define ROW_K(G, P, N, T, S)                                                                       \
    { G##1##P##N##T##S, G##2##P##N##T##S, G##3##P##N##T##S, G##4##P##N##T##S }
#define ROW_PNT(G, S)                                                                              \
    {                                                                                              \
        {NULL, NULL, NULL, NULL}, ROW_K(G, 0, 0, 1, S), ROW_K(G, 0, 1, 0, S),                      \
            ROW_K(G, 0, 1, 1, S), ROW_K(G, 1, 0, 0, S), ROW_K(G, 1, 0, 1, S),                      \
            ROW_K(G, 1, 1, 0, S), ROW_K(G, 1, 1, 1, S)                                             \
    }

/* table[variant][P * 4 + N * 2 + T][k - 1]; variant: mat4 (full * 2 + map)
 * 0..3, mat3x4 4 + full */
static const group_fn table[6][8][4] = {ROW_PNT(g2_, 00), ROW_PNT(g2_, 01), ROW_PNT(g2_, 10),
                                        ROW_PNT(g2_, 11), ROW_PNT(g1_, 0),  ROW_PNT(g1_, 1)};

static void run_groups(const lmb_skin_range *r, uint32_t begin, uint32_t end, int full) {
    const lmb_skin_mesh *m = r->mesh;
    int flags = (r->pos ? 4 : 0) | (r->nrm ? 2 : 0) | (r->tan ? 1 : 0);
    if (!flags) return;
    int variant = r->layout != LMB_PALETTE_MAT4 ? 4 + full : full * 2 + (r->map != NULL);
    const group_fn *fns = table[variant][flags];
    for (uint32_t k = 1; k <= 4; k++) {
        uint32_t lo = m->first[k], hi = m->first[k] + m->count[k];
        if (lo < begin) lo = begin;
        if (hi > end) hi = end;
        if (lo < hi) fns[k - 1](r, lo, hi);
    }
}

LMB_AVX2 void lmb_skin_range_avx2(const lmb_skin_range *r) {
    if (r->begin >= r->end) return;
    if (r->full) {
        /* every 16-byte store spills only onto bytes written later by this
         * call, except the last vertex's */
        run_groups(r, r->begin, r->end - 1, 1);
        run_groups(r, r->end - 1, r->end, 0);
    } else {
        run_groups(r, r->begin, r->end, 0);
    }
}

#else

void lmb_skin_range_avx2(const lmb_skin_range *r) {
    lmb_skin_range_portable(r);
}

#endif
