/* fuzz_access.h: builds an accessor description from fuzz bytes and checks
 * a decoded accessor against a plain reference decoder (shared by the
 * accessor and sparse harnesses). */
#ifndef LIMBER_FUZZ_ACCESS_H
#define LIMBER_FUZZ_ACCESS_H

#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "gltf.h"

static const uint32_t fz_types[] = {LMB_GLTF_I8,  LMB_GLTF_U8,  LMB_GLTF_I16, LMB_GLTF_U16,
                                    LMB_GLTF_U32, LMB_GLTF_F32, 5124,         0};

/* Fills a from the reader; the buffer is buf/buf_len (owned by the caller). */
static inline void fz_accessor(fz_reader *r, lmb_accessor *a, const uint8_t *buf, size_t buf_len,
                               int *want_int) {
    memset(a, 0, sizeof *a);
    uint8_t flags = fz_u8(r);
    a->component_type = fz_types[fz_u8(r) % 8];
    uint8_t comps = fz_u8(r);
    a->is_matrix = (flags >> 2) & 1;
    a->components =
        a->is_matrix ? (comps < 250 ? (uint32_t[]){4, 9, 16}[comps % 3] : comps) : 1u + comps % 5;
    a->normalized = (flags >> 3) & 1;
    *want_int = (flags >> 1) & 1;
    a->view_offset = fz_size(r, 256);
    a->view_length = fz_size(r, 4096);
    a->view_stride = (flags >> 4) & 1 ? fz_size(r, 80) : 0;
    a->offset = fz_size(r, 64);
    a->count = fz_size(r, 2048);
    if (flags & 1) {
        a->data = buf;
        a->data_len = buf_len;
    }
}

static inline int fz_signed(uint32_t t) {
    return t == LMB_GLTF_I8 || t == LMB_GLTF_I16;
}

static inline size_t fz_comp_size(uint32_t t) {
    return t == LMB_GLTF_I8 || t == LMB_GLTF_U8     ? 1
           : t == LMB_GLTF_I16 || t == LMB_GLTF_U16 ? 2
                                                    : 4;
}

/* The raw value of component k of element i, read the obvious way, after
 * checking (oracle) that lmb_accessor_check really kept it in bounds. */
static inline double fz_ref_value(const lmb_accessor *a, size_t i, uint32_t k, uint32_t *bits) {
    size_t cs = fz_comp_size(a->component_type);
    uint32_t rows = a->components, col = 0, row = k;
    if (a->is_matrix) {
        rows = a->components == 4 ? 2 : a->components == 9 ? 3 : 4;
        col = k / rows;
        row = k % rows;
    }
    size_t col_bytes = rows * cs;
    if (a->is_matrix) col_bytes = (col_bytes + 3) & ~(size_t)3;
    size_t es = col_bytes * (a->is_matrix ? rows : 1);
    size_t stride = a->view_stride ? a->view_stride : es;
    size_t at = a->view_offset + a->offset + i * stride + col * col_bytes + row * cs;
    if (at + cs > a->view_offset + a->view_length || at + cs > a->data_len)
        lmb_fuzz_fail("element %zu component %u at byte %zu is outside the view", i, k, at);
    const uint8_t *p = a->data + at;
    uint32_t u = 0;
    for (size_t b = 0; b < cs; b++)
        u |= (uint32_t)p[b] << (8 * b);
    *bits = u;
    switch (a->component_type) {
    case LMB_GLTF_I8:
        *bits = (uint32_t)(int32_t)(int8_t)u;
        return (double)(int8_t)u;
    case LMB_GLTF_I16:
        *bits = (uint32_t)(int32_t)(int16_t)u;
        return (double)(int16_t)u;
    case LMB_GLTF_F32: {
        float f;
        memcpy(&f, &u, 4);
        return (double)f;
    }
    default:
        return (double)u;
    }
}

/* Checks decoded floats (and, for integer types, decoded u32 when uout is
 * not NULL) against the reference. st is what lmb_accessor_read_f32 said. */
static inline void fz_check_decoded(const lmb_accessor *a, const float *fout, lmb_status st,
                                    size_t bad, const uint32_t *uout) {
    size_t nan_at = (size_t)-1;
    for (size_t i = 0; i < a->count && a->data; i++)
        for (uint32_t k = 0; k < a->components; k++) {
            uint32_t bits;
            double v = fz_ref_value(a, i, k, &bits);
            if (uout && uout[i * a->components + k] != bits)
                lmb_fuzz_fail("u32 element %zu.%u: %u, expected %u", i, k,
                              uout[i * a->components + k], bits);
            if (a->normalized) {
                double d = a->component_type == LMB_GLTF_I8    ? v / 127.0
                           : a->component_type == LMB_GLTF_U8  ? v / 255.0
                           : a->component_type == LMB_GLTF_I16 ? v / 32767.0
                                                               : v / 65535.0;
                v = d < -1.0 ? -1.0 : d;
            }
            if (!isfinite((float)v)) {
                if (nan_at == (size_t)-1) nan_at = i;
                continue;
            }
            if (nan_at != (size_t)-1) continue; /* decoding stopped there */
            if (fout && fout[i * a->components + k] != (float)v)
                lmb_fuzz_fail("f32 element %zu.%u: %g, expected %g", i, k,
                              (double)fout[i * a->components + k], v);
        }
    if (!fout) return;
    if (nan_at != (size_t)-1) {
        if (st != LMB_ENAN || bad != nan_at)
            lmb_fuzz_fail("non-finite element %zu not reported (status %d, bad %zu)", nan_at,
                          (int)st, bad);
    } else if (st != LMB_OK) {
        lmb_fuzz_fail("read_f32 failed (%d) on finite data", (int)st);
    }
    if (!a->data)
        for (size_t k = 0; k < a->count * a->components; k++)
            if (fout[k] != 0.0f) lmb_fuzz_fail("accessor without data is not zero");
    if (a->normalized && st == LMB_OK)
        for (size_t k = 0; k < a->count * a->components; k++)
            if (!(fout[k] >= -1.0f && fout[k] <= 1.0f))
                lmb_fuzz_fail("normalized value outside [-1, 1]");
}

#endif
