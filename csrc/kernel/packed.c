/* packed.c: portable decoding of packed clips (packed.h). */
#include "packed.h"

#define PK(name) lmb_pk_##name
#include "packed_decode.h"

void lmb_packed_chunk(const lmb_packed *p, uint32_t q, float pos, float *out, uint32_t cstride) {
    PK(chunk_impl)(p, q, pos, out, cstride);
}

void lmb_packed_chunk_cached(const lmb_packed *p, uint32_t q, float pos, float *cache, float *out,
                             uint32_t cstride) {
    PK(chunk_cached_impl)(p, q, pos, cache, out, cstride);
}

void lmb_packed_sample(const lmb_packed *p, uint32_t joint, uint32_t path, float t, float *out) {
    lmb_v8f r[4];
    float v[32];
    PK(stream)(p, p->streams + (size_t)(joint / 8) * 3 + path, (int)path, lmb_packed_pos(p, t), r);
    memcpy(v, r, sizeof v);
    for (uint32_t m = 0; m < (path == 1 ? 4u : 3u); m++)
        out[m] = v[m * 8 + joint % 8];
}

/* ---- layout and checks (snapshots) ------------------------------------ */

#include "clip.h"

#include <math.h>

#define PK_SECTION 16

static size_t pk_up(size_t n) {
    return lmb_align_up(n, PK_SECTION);
}

/* Byte sizes of the arrays of a packed clip, in layout order; 0 overflow. */
static size_t pk_sizes(const lmb_packed_sizes *z, size_t sz[10]) {
    memset(sz, 0, 10 * sizeof(size_t));
    if (z->chunks == 0 || z->chunks > (LMB_MAX_JOINTS + 8u) / 8u || z->frames == 0 ||
        z->frames > LMB_PK_MAX_FRAMES || z->tracks > (1u << 26) || z->values > UINT32_MAX - 16u ||
        z->data_bytes > UINT32_MAX - 16u)
        return 0;
    sz[0] = pk_up(sizeof(lmb_clip));
    sz[1] = pk_up((size_t)z->tracks * sizeof(lmb_track));
    sz[2] = pk_up((size_t)z->keys * 4);
    /* node values keep the exact clips' read padding of 16 floats; a packed
     * clip without node tracks has no values and no padding (64 bytes saved) */
    sz[3] = z->values ? pk_up(((size_t)z->values + 16) * 4) : 0;
    sz[4] = pk_up((size_t)z->chunks * 8);
    sz[5] = pk_up((size_t)z->chunks * 3 * sizeof(lmb_pstream));
    sz[6] = z->has_times ? pk_up((size_t)z->frames * 4) : 0;
    sz[7] = pk_up((size_t)z->keyframes * 2);
    sz[8] = pk_up((size_t)z->range_floats * 4);
    sz[9] = (size_t)z->data_bytes + 4; /* + the read padding */
    uint64_t total = PK_SECTION;
    for (int k = 0; k < 10; k++)
        total += sz[k];
    return total <= SIZE_MAX / 2 ? (size_t)total : 0;
}

size_t lmb_packed_clip_bytes(const lmb_packed_sizes *z) {
    size_t sz[10];
    return pk_sizes(z, sz);
}

lmb_clip *lmb_packed_clip_place(void *mem, const lmb_packed_sizes *z) {
    size_t sz[10];
    pk_sizes(z, sz);
    unsigned char *b = (unsigned char *)lmb_align_ptr(mem, PK_SECTION);
    memset(b, 0, sz[0]);
    lmb_clip *c = (lmb_clip *)(void *)b;
    unsigned char *p = b + sz[0];
    c->tracks = (lmb_track *)(void *)p, p += sz[1];
    c->times = (float *)(void *)p, p += sz[2];
    c->values = (float *)(void *)p, p += sz[3];
    c->track_count = z->tracks, c->key_total = z->keys, c->value_total = z->values;
    lmb_packed *k = &c->packed;
    k->tracked = p, p += sz[4];
    k->streams = (const lmb_pstream *)(void *)p, p += sz[5];
    k->times = z->has_times ? (const float *)(void *)p : NULL, p += sz[6];
    k->keyframes = (const uint16_t *)(void *)p, p += sz[7];
    k->ranges = (const float *)(void *)p, p += sz[8];
    k->data = p;
    memset(p + z->data_bytes, 0, 4);
    k->chunks = z->chunks, k->frames = z->frames, k->stream_count = z->chunks * 3;
    k->keyframe_count = z->keyframes, k->range_floats = z->range_floats;
    k->data_bytes = z->data_bytes;
    return c;
}

static lmb_status pk_fail(lmb_error *err, const char *detail, uint32_t i, double v) {
    return lmb_error_set(err, LMB_EINVAL, "packed", detail, i, 0, v, 0);
}

lmb_status lmb_packed_check(const lmb_clip *c, lmb_error *err) {
    lmb_error_clear(err);
    const lmb_packed *p = &c->packed;
    uint32_t Q = p->chunks, F = p->frames;
    if (Q == 0 || Q != (c->joint_span > 0 ? (c->joint_span + 7u) / 8u : 1u) ||
        p->stream_count != Q * 3)
        return pk_fail(err, "chunk count {v} does not fit the joint span", 0, (double)Q);
    if (F == 0 || F > LMB_PK_MAX_FRAMES || p->interp > LMB_LINEAR)
        return pk_fail(err, "frame count {v} or interpolation out of range", 0, (double)F);
    if (!isfinite(p->t0) || !isfinite(p->dt) || !isfinite(p->inv_dt) || p->t0 < 0.0f ||
        p->dt < 0.0f || p->inv_dt < 0.0f || (!p->times && F > 1 && !(p->dt > 0.0f)))
        return pk_fail(err, "grid start or interval {v} is not a finite time", 0, (double)p->dt);
    if (p->times) {
        for (uint32_t i = 0; i < F; i++)
            if (!isfinite(p->times[i]) || p->times[i] < 0.0f ||
                (i > 0 && !(p->times[i] > p->times[i - 1])))
                return pk_fail(err, "grid time {i} ({v}) is not finite and increasing", i,
                               (double)p->times[i]);
    }
    uint32_t tracked = 0;
    for (uint32_t j = 0; j < Q * 8; j++) {
        if (p->tracked[j] > 7 || (j >= c->joint_span && p->tracked[j]))
            return pk_fail(err, "tracked bits of joint {i} out of range", j, (double)p->tracked[j]);
        tracked += (p->tracked[j] & 1u) + (p->tracked[j] >> 1 & 1u) + (p->tracked[j] >> 2);
    }
    if (tracked != p->tracked_count)
        return pk_fail(err, "tracked count {v} does not match the tracked bits", 0,
                       (double)p->tracked_count);
    for (uint32_t i = 0; i < p->range_floats; i++)
        if (!isfinite(p->ranges[i]))
            return pk_fail(err, "range float {i} ({v}) is not finite", i, (double)p->ranges[i]);
    for (uint32_t si = 0; si < Q * 3; si++) {
        const lmb_pstream *s = p->streams + si;
        uint32_t ch = si % 3, n = ch == 1 ? 4u : 3u, rec = 0, rf = 0;
        for (uint32_t r = 0; r < 4; r++) {
            uint32_t k = s->kind[r];
            int ok = r < n
                         ? (k == LMB_PK_SKIP || k == LMB_PK_CONST || k == LMB_PK_F32 ||
                            lmb_pk_quantized(k) || lmb_pk_var(k) ||
                            ((k == LMB_PK_DERIVE || k == LMB_PK_DERIVE_ANY) && ch == 1 && r == 3) ||
                            (k == LMB_PK_SAME && ch != 1 && r >= 1))
                         : k == LMB_PK_SKIP;
            if (!ok) return pk_fail(err, "stream {i}: row kind {v} is not valid", si, (double)k);
            const float *rg = p->ranges + s->range + rf;
            if (lmb_pk_var(k)) { /* its reduction word: an integer of 24 bits */
                if ((uint64_t)s->range + rf + 17u > p->range_floats)
                    return pk_fail(err, "stream {i}: keys, step or offsets out of range", si,
                                   (double)s->keys);
                if (!(rg[16] >= 0.0f && rg[16] <= (float)LMB_PK_RED_MAX &&
                      rg[16] == (float)(uint32_t)rg[16]))
                    return pk_fail(err, "stream {i}: a row's width word {v} is not valid", si,
                                   (double)rg[16]);
                /* no joint narrower than 0 bits, none on a skipped lane */
                for (uint32_t l = 0; l < 8; l++) {
                    uint32_t d = (uint32_t)rg[16] >> (3 * l) & 7u;
                    if (d > k - 32u || (d && (s->skip >> l & 1u)))
                        return pk_fail(err, "stream {i}: a row's width word {v} is not valid", si,
                                       (double)rg[16]);
                }
            }
            if (k == LMB_PK_DERIVE_ANY) { /* its word: 2 bits per joint */
                if ((uint64_t)s->range + rf + 1u > p->range_floats)
                    return pk_fail(err, "stream {i}: keys, step or offsets out of range", si,
                                   (double)s->keys);
                if (!(rg[0] >= 0.0f && rg[0] <= 65535.0f && rg[0] == (float)(uint32_t)rg[0]))
                    return pk_fail(err, "stream {i}: a row's component word {v} is not valid", si,
                                   (double)rg[0]);
            }
            rec += lmb_pk_row_bytes(k, s->skip, rg), rf += lmb_pk_range_floats(k);
        }
        if (s->keys == 0 || s->keys > F || s->rec != rec || s->step > LMB_PK_MAX_STEP ||
            (uint64_t)s->data + (uint64_t)s->keys * rec > p->data_bytes ||
            (uint64_t)s->range + rf > p->range_floats)
            return pk_fail(err, "stream {i}: keys, step or offsets out of range", si,
                           (double)s->keys);
        if (s->step == 0) {
            if (s->keys < 2 || (uint64_t)s->kf + s->keys > p->keyframe_count)
                return pk_fail(err, "stream {i}: key frames out of range", si, (double)s->kf);
            const uint16_t *fr = p->keyframes + s->kf;
            if (fr[0] != 0 || fr[s->keys - 1] != F - 1)
                return pk_fail(err, "stream {i}: key frames must span the grid", si, 0);
            for (uint32_t m = 1; m < s->keys; m++)
                if (!(fr[m] > fr[m - 1]))
                    return pk_fail(err, "stream {i}: key frames must increase", si, (double)m);
        }
        /* F32 rows: finite floats */
        uint32_t off = 0;
        rf = 0;
        for (uint32_t r = 0; r < n; r++) {
            if (s->kind[r] == LMB_PK_F32) {
                for (uint32_t a = 0; a < s->keys; a++) {
                    float v[8];
                    memcpy(v, p->data + s->data + (size_t)a * rec + off, sizeof v);
                    for (int l = 0; l < 8; l++)
                        if (!isfinite(v[l]))
                            return pk_fail(err, "stream {i}: a raw float is not finite", si,
                                           (double)v[l]);
                }
            }
            off += lmb_pk_row_bytes(s->kind[r], s->skip, p->ranges + s->range + rf);
            rf += lmb_pk_range_floats(s->kind[r]);
        }
    }
    return LMB_OK;
}
