/* packed.h: compressed (packed) joint tracks of a clip, error-bounded.
 *
 * A packed clip keeps its joint tracks on one uniform grid of `frames`
 * frames (t0, dt): the source's own key grid when it has one, else the
 * source resampled. Joints are grouped 8 to a chunk as in the dense form
 * (lmb_dense), and each chunk has three streams: translation (rows x y z),
 * rotation (x y z w) and scale (x y z). A stream keeps one key every
 * `step` frames (plus the last frame), so smooth or quiet joints keep few
 * keys and every lookup is still O(1): key = floor(frame / step). Each row
 * of a stream (one component of the 8 joints) has a kind:
 *   SKIP  no joint of the chunk has the track (the sampler writes the rest
 *         pose there, as for any untracked property);
 *   CONST one value per joint (8 floats, stored once);
 *   Q(b)  per joint a range (base, scale: 16 floats) and b bits (1 .. 16)
 *         per key and stored joint, packed low bit first (8 joints: b
 *         bytes): value = base + scale * q. Joints in the stream's `skip`
 *         mask (the clip drops their track) take no bits: they read q = 0,
 *         their base (the rest value);
 *   V(b)  as Q(b), but each joint with its own width: joint l takes
 *         b - red_l bits (red_l 0 .. 7, none below 0; a joint of width 0
 *         reads q = 0, its base), the row's range keeping, after base and
 *         scale, one float that holds the integer sum of red_l << 3l
 *         (below 2^24: exact and finite). A joint whose values span little
 *         (a finger next to the hips) then does not take the bits of the
 *         chunk's busiest joint;
 *   F32   raw floats;
 *   SAME  (translation and scale rows y and z) not stored: row x's values,
 *         for streams whose three components are equal in every joint
 *         (uniform scales, the common case: one row of bits, not three);
 *   DERIVE (rotation w only) not stored: w = sqrt(1 - x^2 - y^2 - z^2), the
 *         keys being stored with w >= 0 (q and -q are one rotation).
 *   DERIVE_ANY (rotation row 3 only) per joint, the component (x, y, z or
 *         w) that stays farthest from 0 over the clip is derived, >= 0, from
 *         the other three, which rows 0 .. 2 hold in x y z w order; the
 *         row's range is one float holding the integer sum of idx_l << 2l
 *         (the derived component of joint l). A joint turning through 180
 *         degrees (w passing 0) then keeps three rows, not four.
 * A stream's key record holds its rows' quantized values (8 joints each)
 * one after the other, so the two keys a sample reads are adjacent bytes.
 * Rotations are stored sign-continuous per joint and interpolated by slerp
 * on the shorter arc, as exact clips are (qpoly.h's polynomials, lerp
 * weights for keys a few degrees apart, then normalised; the compressor
 * measures exactly that decoding against the source, so the bound covers
 * it); translations and scales with lerp.
 *
 * The compressor (lmb_pack_*) picks, per stream, the step and the row
 * kinds that use the fewest bytes while every joint's local error stays
 * within a budget derived from the tolerance: the tolerance divided by the
 * joint's reach (the virtual distance plus the distance to its farthest
 * descendant) for rotations and scales, the tolerance itself for
 * translations. It then measures the model-space error of the whole
 * skeleton (each joint's origin and three points at the virtual distance
 * along its axes, at every source key time and every midpoint) and
 * tightens the budgets until the largest error is within the tolerance.
 *
 * Everything is offsets into one block (no pointers but the ones set by
 * lmb_packed_bind), so a packed clip can be stored and used in place. */
#ifndef LIMBER_PACKED_H
#define LIMBER_PACKED_H

#include "limber.h"

enum {
    LMB_PK_SKIP = 0,
    LMB_PK_CONST = 1,
    LMB_PK_F32 = 4,
    LMB_PK_DERIVE = 5,
    LMB_PK_DERIVE_ANY = 6,
    LMB_PK_SAME = 7
};
/* Quantized rows of b bits (1 .. 16) per joint: b bytes per key. */
#define LMB_PK_Q(b) (16u + (b))
#define LMB_PK_U8 LMB_PK_Q(8)
#define LMB_PK_U16 LMB_PK_Q(16)

static inline int lmb_pk_quantized(uint32_t kind) {
    return kind > 16u && kind <= 32u;
}
/* Quantized rows of at most b bits (1 .. 15) per joint, a width per joint. */
#define LMB_PK_V(b) (32u + (b))
static inline int lmb_pk_var(uint32_t kind) {
    return kind > 32u && kind < 48u;
}
/* Largest reduction word of a V row (8 joints x 3 bits). */
#define LMB_PK_RED_MAX ((1u << 24) - 1u)

/* Widths w[0 .. 8) of a V row from its reduction word (a float holding an
 * integer <= LMB_PK_RED_MAX: lmb_packed_check checks it), the joints in
 * `skip` taking none; returns their sum. */
static inline uint32_t lmb_pk_var_widths(uint32_t kind, uint32_t skip, float word, uint32_t *w) {
    uint32_t b = kind - 32u, red = (uint32_t)word, sum = 0;
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t d = red >> (3u * l) & 7u;
        w[l] = (skip >> l & 1u) || d >= b ? 0u : b - d;
        sum += w[l];
    }
    return sum;
}
/* The bits of a V row: b per stored joint less their reductions (the sum of
 * 8 fields of 3 bits, two at a time). Equal to lmb_pk_var_widths' sum
 * where no reduction exceeds b and skipped joints have none, which
 * lmb_packed_check makes sure of; a decoder finds the next row without
 * waiting for the widths. */
static inline uint32_t lmb_pk_var_bits(uint32_t kind, uint32_t skip, float word) {
    uint32_t x = (uint32_t)word;
    uint32_t s1 = (x & 0x1C71C7u) + (x >> 3 & 0x1C71C7u);
    uint32_t s2 = (s1 & 0x03F03Fu) + (s1 >> 6 & 0x03F03Fu);
    uint32_t stored = 8u - (uint32_t)__builtin_popcount(skip & 0xFFu);
    return stored * (kind - 32u) - ((s2 & 0xFFFu) + (s2 >> 12));
}
/* Bytes a row of this kind takes in a key record, the joints in `skip` (a
 * lane mask) left out of quantized rows; rg: the row's range floats (read
 * for V rows only). */
static inline uint32_t lmb_pk_row_bytes(uint32_t kind, uint32_t skip, const float *rg) {
    uint32_t stored = 8u - (uint32_t)__builtin_popcount(skip & 0xFFu);
    if (lmb_pk_var(kind)) return (lmb_pk_var_bits(kind, skip, rg[16]) + 7u) / 8u;
    return kind == LMB_PK_F32       ? 32u
           : lmb_pk_quantized(kind) ? (stored * (kind - 16u) + 7u) / 8u
                                    : 0u;
}
/* Floats of range data a row of this kind keeps (base, then scale; V rows
 * then their reduction word). */
static inline uint32_t lmb_pk_range_floats(uint32_t kind) {
    return kind == LMB_PK_CONST        ? 8u
           : lmb_pk_quantized(kind)    ? 16u
           : lmb_pk_var(kind)          ? 17u
           : kind == LMB_PK_DERIVE_ANY ? 1u
                                       : 0u;
}

/* Largest step (frames per kept key) of a stream. */
#define LMB_PK_MAX_STEP 32

typedef struct lmb_pstream {
    uint32_t data;  /* byte offset of key 0's record in lmb_packed.data */
    uint32_t range; /* float offset of the rows' ranges in lmb_packed.ranges */
    uint32_t keys;  /* keys kept (1: constant stream) */
    uint32_t kf;    /* step 0: offset of the keys' frames in lmb_packed.keyframes */
    uint16_t step;  /* frames per key (>= 1), or 0: the keys sit at frames keyframes[kf ..] */
    uint8_t rec;    /* bytes per key record (at most 4 rows of 32) */
    uint8_t skip;   /* lanes (joints) quantized rows store no bits for (above) */
    uint8_t kind[4];
} lmb_pstream;

typedef struct lmb_packed {
    const lmb_pstream *streams; /* chunks * 3 (T, R, S); NULL: the clip is not packed */
    const float *ranges;
    const uint8_t *data;
    const float *times;        /* frames grid times (NULL: uniform, t0 + k dt) */
    const uint16_t *keyframes; /* the frames of the streams with irregular keys */
    const uint8_t *tracked;    /* per joint below the span: bit path set when the clip
                                * animates (joint, path) (the others hold the rest pose) */
    uint32_t chunks, frames;
    uint32_t interp;       /* LMB_LINEAR or LMB_STEP (clip.h) */
    uint32_t stream_count; /* chunks * 3 */
    uint32_t range_floats, data_bytes, keyframe_count;
    uint32_t tracked_count; /* bits set in tracked: the packed clip's joint tracks */
    float t0, inv_dt, dt;
} lmb_packed;

/* Frame position of clip time t (clamped to [0, frames - 1]). */
static inline float lmb_packed_pos(const lmb_packed *p, float t) {
    if (p->times) { /* a grid of the source's key times: binary search */
        const float *tm = p->times;
        uint32_t lo = 0, n = p->frames;
        if (!(t > tm[0])) return 0.0f;
        if (t >= tm[n - 1]) return (float)(n - 1);
        while (n > 1) {
            uint32_t half = n / 2;
            if (tm[lo + half] <= t) lo += half;
            n -= half;
        }
        return (float)lo + (t - tm[lo]) / (tm[lo + 1] - tm[lo]);
    }
    float f = (t - p->t0) * p->inv_dt;
    float last = (float)(p->frames - 1);
    /* STEP: a time a rounding below a key time is that key's */
    if (p->interp == 0) f += 1e-3f;
    return f > 0.0f ? (f < last ? f : last) : 0.0f;
}

/* Decodes chunk q at frame position pos: out[c * cstride + j] for the 10
 * components (t xyz, q xyzw, s xyz) of the chunk's 8 joints. Portable;
 * samplers use the cached form below. */
void lmb_packed_chunk(const lmb_packed *p, uint32_t q, float pos, float *out, uint32_t cstride);

/* Floats of decoded-key cache per chunk (lmb_packed_chunk_cached): keys a
 * and b of the chunk's rows (2 x 80) and the three streams' key tags. */
#define LMB_PK_CACHE_FLOATS 164u

/* lmb_packed_chunk through a cache of LMB_PK_CACHE_FLOATS floats (all zero
 * when empty; belongs to one instance and one clip): keys are decoded only
 * when a stream's key interval changes. Same results. */
void lmb_packed_chunk_cached(const lmb_packed *p, uint32_t q, float pos, float *cache, float *out,
                             uint32_t cstride);
/* Chunk q's two keys per stream at frame position pos into the cache
 * (keys a at cache[0 .. 80), b at cache[80 .. 160), the dense frames'
 * layout) and the T, R, S factors into al[0 .. 3), for the AVX2 sampler to
 * interpolate as it does dense frames (x86/packed_avx2.c). */
void lmb_packed_chunk_keys_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                float *al);

/* Largest grid of a packed clip (streams with irregular keys only on grids
 * of at most 65536 frames: their key frames are 16-bit). */
#define LMB_PK_MAX_FRAMES (1u << 22)

/* Array sizes of a packed clip: its node tracks (exact, as lmb_clip) and
 * its packed block. */
typedef struct lmb_packed_sizes {
    uint32_t tracks, keys, values; /* node tracks, key times, record floats */
    uint32_t chunks, frames, has_times, keyframes, range_floats, data_bytes;
} lmb_packed_sizes;

/* Bytes for a packed clip of these sizes (any alignment; 0: out of range). */
size_t lmb_packed_clip_bytes(const lmb_packed_sizes *z);

/* Lays out a packed clip (header zeroed, array pointers and counts set, the
 * 4 bytes of read padding after the data zeroed) in mem, at least
 * lmb_packed_clip_bytes(z) bytes. The compressor and snapshots fill it. */
struct lmb_clip *lmb_packed_clip_place(void *mem, const lmb_packed_sizes *z);

/* Checks, without changing anything, the packed block of clip c (filled
 * from elsewhere: a snapshot): chunks fit the joint span, a finite grid
 * (increasing times when it has them), tracked bits and their count, every
 * stream's row kinds, record size, step, key count and offsets inside the
 * arrays, irregular key frames increasing from frame 0 to the last, range
 * and raw floats finite. Every read the decoder makes is
 * then inside the block. */
lmb_status lmb_packed_check(const struct lmb_clip *c, lmb_error *err);

/* One joint's property (path 0 T, 1 R, 2 S) at clip time t. */
void lmb_packed_sample(const lmb_packed *p, uint32_t joint, uint32_t path, float t, float *out);

#endif
