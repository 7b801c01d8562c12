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
