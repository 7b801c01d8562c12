/* gltf.c: GLB chunks, base64, accessor decoding and skin influences, with
 * every bound checked before reading (see gltf.h). */
#include "gltf.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static lmb_status fail(lmb_status st, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ---- GLB ---------------------------------------------------------------- */

#define GLB_JSON 0x4E4F534Au
#define GLB_BIN 0x004E4942u

lmb_status lmb_glb_parse(const uint8_t *data, size_t len, lmb_glb *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (len < 12)
        return fail(LMB_EINVAL, err, errlen,
                    "GLB: file of %zu bytes is shorter than the 12-byte header", len);
    if (memcmp(data, "glTF", 4) != 0)
        return fail(LMB_EINVAL, err, errlen, "GLB: wrong magic (expected \"glTF\")");
    uint32_t version = rd_u32(data + 4), total = rd_u32(data + 8);
    if (version != 2)
        return fail(LMB_EINVAL, err, errlen, "GLB: unsupported version %u (expected 2)", version);
    if (total != len)
        return fail(LMB_EINVAL, err, errlen, "GLB: header length %u but the file has %zu bytes",
                    total, len);
    size_t pos = 12;
    int chunk = 0;
    while (pos < len) {
        if (len - pos < 8)
            return fail(LMB_EINVAL, err, errlen, "GLB: chunk %d header truncated at byte %zu",
                        chunk, pos);
        size_t clen = rd_u32(data + pos);
        uint32_t ctype = rd_u32(data + pos + 4);
        pos += 8;
        if (clen > len - pos)
            return fail(LMB_EINVAL, err, errlen,
                        "GLB: chunk %d length %zu runs past the end of the file (%zu bytes left)",
                        chunk, clen, len - pos);
        if (chunk == 0) {
            if (ctype != GLB_JSON)
                return fail(LMB_EINVAL, err, errlen, "GLB: first chunk is not JSON (type 0x%08x)",
                            ctype);
            out->json = data + pos;
            out->json_len = clen;
        } else if (chunk == 1 && ctype == GLB_BIN) {
            out->bin = data + pos;
            out->bin_len = clen;
        } else if (ctype == GLB_JSON || ctype == GLB_BIN) {
            return fail(LMB_EINVAL, err, errlen, "GLB: chunk %d: unexpected %s chunk", chunk,
                        ctype == GLB_JSON ? "second JSON" : "BIN");
        }
        pos += clen;
        chunk++;
    }
    if (chunk == 0) return fail(LMB_EINVAL, err, errlen, "GLB: no JSON chunk");
    return LMB_OK;
}

/* ---- base64 ------------------------------------------------------------- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

lmb_status lmb_base64_decode(const char *in, size_t len, uint8_t *out, size_t *out_len, char *err,
                             size_t errlen) {
    size_t n = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad)
            return fail(LMB_EINVAL, err, errlen, "base64: invalid character at position %zu", i);
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    if (pad > 2 || bits >= 6)
        return fail(LMB_EINVAL, err, errlen, "base64: truncated data (%zu characters)", len);
    *out_len = n;
    return LMB_OK;
}

/* ---- accessors ---------------------------------------------------------- */

static size_t comp_size(uint32_t type) {
    switch (type) {
    case LMB_GLTF_I8:
    case LMB_GLTF_U8:
        return 1;
    case LMB_GLTF_I16:
    case LMB_GLTF_U16:
        return 2;
    case LMB_GLTF_U32:
    case LMB_GLTF_F32:
        return 4;
    default:
        return 0;
    }
}

/* Rows per column and column count of an element. */
static void shape(const lmb_accessor *a, uint32_t *rows, uint32_t *cols) {
    if (a->is_matrix) {
        *rows = a->components == 4 ? 2 : a->components == 9 ? 3 : 4;
        *cols = *rows;
    } else {
        *rows = a->components;
        *cols = 1;
    }
}

size_t lmb_accessor_element_size(const lmb_accessor *a) {
    uint32_t rows, cols;
    shape(a, &rows, &cols);
    size_t col = rows * comp_size(a->component_type);
    if (a->is_matrix) col = lmb_align_up(col, 4);
    return col * cols;
}

lmb_status lmb_accessor_check(const lmb_accessor *a, int want_int, char *err, size_t errlen) {
    size_t cs = comp_size(a->component_type);
    if (!cs)
        return fail(LMB_EINVAL, err, errlen, "componentType %u is not a glTF component type",
                    a->component_type);
    if (a->is_matrix ? !(a->components == 4 || a->components == 9 || a->components == 16)
                     : !(a->components >= 1 && a->components <= 4))
        return fail(LMB_EINVAL, err, errlen, "invalid element type");
    if (a->normalized && (a->component_type == LMB_GLTF_F32 || a->component_type == LMB_GLTF_U32))
        return fail(LMB_EINVAL, err, errlen,
                    "normalized is only allowed for 8- and 16-bit integers");
    if (want_int && (a->component_type == LMB_GLTF_F32 || a->normalized))
        return fail(LMB_EINVAL, err, errlen, "integer data expected, componentType %u%s",
                    a->component_type, a->normalized ? " normalized" : "");
    if (a->count < 1) return fail(LMB_ERANGE, err, errlen, "count must be at least 1");
    if (a->count > LMB_GLTF_MAX_COUNT ||
        a->count > LMB_GLTF_MAX_OUTPUT / (a->components * sizeof(float)))
        return fail(
            LMB_ERANGE, err, errlen, "count %zu exceeds the limit of %zu elements", a->count,
            (size_t)(LMB_GLTF_MAX_OUTPUT / (a->components * sizeof(float))) < LMB_GLTF_MAX_COUNT
                ? LMB_GLTF_MAX_OUTPUT / (a->components * sizeof(float))
                : LMB_GLTF_MAX_COUNT);
    if (!a->data) return LMB_OK; /* zeros */
    size_t es = lmb_accessor_element_size(a);
    size_t stride = a->view_stride ? a->view_stride : es;
    if (a->view_stride && a->view_stride < es)
        return fail(LMB_EINVAL, err, errlen,
                    "byteStride %zu is smaller than the element (%zu bytes)", a->view_stride, es);
    if (a->view_offset > a->data_len || a->view_length > a->data_len - a->view_offset)
        return fail(LMB_ERANGE, err, errlen,
                    "bufferView range [%zu, %zu + %zu) is past the end of its buffer (%zu bytes)",
                    a->view_offset, a->view_offset, a->view_length, a->data_len);
    /* last byte used: offset + (count - 1) * stride + es <= view_length */
    if (a->offset > a->view_length)
        return fail(LMB_ERANGE, err, errlen,
                    "byteOffset %zu is past the end of its bufferView (%zu bytes)", a->offset,
                    a->view_length);
    size_t room = a->view_length - a->offset;
    if (es > room || (a->count - 1) > (room - es) / stride)
        return fail(LMB_ERANGE, err, errlen,
                    "%zu elements of %zu bytes (stride %zu) from byteOffset %zu run past the end "
                    "of the bufferView (%zu bytes)",
                    a->count, es, stride, a->offset, a->view_length);
    return LMB_OK;
}

static double comp_value(const uint8_t *p, uint32_t type, uint32_t normalized) {
    switch (type) {
    case LMB_GLTF_I8: {
        int8_t v = (int8_t)p[0];
        return normalized ? fmax((double)v / 127.0, -1.0) : (double)v;
    }
    case LMB_GLTF_U8:
        return normalized ? (double)p[0] / 255.0 : (double)p[0];
    case LMB_GLTF_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        return normalized ? fmax((double)v / 32767.0, -1.0) : (double)v;
    }
    case LMB_GLTF_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return normalized ? (double)v / 65535.0 : (double)v;
    }
    case LMB_GLTF_U32:
        return (double)rd_u32(p);
    default: {
        float v;
        memcpy(&v, p, 4);
        return (double)v;
    }
    }
}

lmb_status lmb_accessor_read_f32(const lmb_accessor *a, float *out, size_t *bad) {
    size_t total = a->count * a->components;
    if (!a->data) {
        memset(out, 0, total * sizeof(float));
        return LMB_OK;
    }
    uint32_t rows, cols;
    shape(a, &rows, &cols);
    size_t cs = comp_size(a->component_type), es = lmb_accessor_element_size(a);
    size_t col_bytes = a->is_matrix ? lmb_align_up(rows * cs, 4) : rows * cs;
    size_t stride = a->view_stride ? a->view_stride : es;
    const uint8_t *base = a->data + a->view_offset + a->offset;
    for (size_t i = 0; i < a->count; i++) {
        const uint8_t *e = base + i * stride;
        float *o = out + i * a->components;
        for (uint32_t c = 0; c < cols; c++)
            for (uint32_t r = 0; r < rows; r++) {
                float v =
                    (float)comp_value(e + c * col_bytes + r * cs, a->component_type, a->normalized);
                if (!isfinite(v)) {
                    *bad = i;
                    return LMB_ENAN;
                }
                o[c * rows + r] = v;
            }
    }
    return LMB_OK;
}

void lmb_accessor_read_u32(const lmb_accessor *a, uint32_t *out) {
    size_t total = a->count * a->components;
    if (!a->data) {
        memset(out, 0, total * sizeof(uint32_t));
        return;
    }
    uint32_t rows, cols;
    shape(a, &rows, &cols);
    size_t cs = comp_size(a->component_type), es = lmb_accessor_element_size(a);
    size_t col_bytes = a->is_matrix ? lmb_align_up(rows * cs, 4) : rows * cs;
    size_t stride = a->view_stride ? a->view_stride : es;
    const uint8_t *base = a->data + a->view_offset + a->offset;
    for (size_t i = 0; i < a->count; i++) {
        const uint8_t *e = base + i * stride;
        for (uint32_t c = 0; c < a->components; c++) {
            /* matrix columns are padded to 4 bytes, as in lmb_accessor_read_f32 */
            const uint8_t *p = e + (c / rows) * col_bytes + (c % rows) * cs;
            uint32_t v;
            switch (a->component_type) {
            case LMB_GLTF_U8:
                v = p[0];
                break;
            case LMB_GLTF_I8:
                v = (uint32_t)(int32_t)(int8_t)p[0];
                break;
            case LMB_GLTF_U16:
                v = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                break;
            case LMB_GLTF_I16: {
                int16_t s;
                memcpy(&s, p, 2);
                v = (uint32_t)(int32_t)s;
                break;
            }
            default:
                v = rd_u32(p);
                break;
            }
            out[i * a->components + c] = v;
        }
    }
}

static lmb_status sparse_check(size_t count, const uint32_t *idx, size_t n, size_t *bad) {
    for (size_t k = 0; k < n; k++) {
        if (idx[k] >= count || (k > 0 && idx[k] <= idx[k - 1])) {
            *bad = k;
            return LMB_ERANGE;
        }
    }
    return LMB_OK;
}

lmb_status lmb_sparse_apply_f32(float *out, size_t count, uint32_t components, const uint32_t *idx,
                                const float *vals, size_t n, size_t *bad) {
    lmb_status st = sparse_check(count, idx, n, bad);
    if (st != LMB_OK) return st;
    for (size_t k = 0; k < n; k++)
        memcpy(out + (size_t)idx[k] * components, vals + k * components,
               components * sizeof(float));
    return LMB_OK;
}

lmb_status lmb_sparse_apply_u32(uint32_t *out, size_t count, uint32_t components,
                                const uint32_t *idx, const uint32_t *vals, size_t n, size_t *bad) {
    lmb_status st = sparse_check(count, idx, n, bad);
    if (st != LMB_OK) return st;
    for (size_t k = 0; k < n; k++)
        memcpy(out + (size_t)idx[k] * components, vals + k * components,
               components * sizeof(uint32_t));
    return LMB_OK;
}

/* ---- skin influences ---------------------------------------------------- */

lmb_status lmb_skin_influences(size_t count, const uint32_t *j0, const float *w0,
                               const uint32_t *j1, const float *w1, uint16_t *out_j, float *out_w,
                               uint32_t *max_joint, size_t *bad) {
    uint32_t maxj = 0;
    int n = j1 ? 8 : 4;
    for (size_t v = 0; v < count; v++) {
        uint32_t jj[8];
        float ww[8];
        for (size_t k = 0; k < 4; k++) {
            jj[k] = j0[v * 4 + k];
            ww[k] = w0[v * 4 + k];
            if (j1) {
                jj[4 + k] = j1[v * 4 + k];
                ww[4 + k] = w1[v * 4 + k];
            }
        }
        for (int k = 0; k < n; k++) {
            /* +inf would pass ">= 0" and turn the renormalised weights into NaN */
            if (!(ww[k] >= 0.0f && ww[k] <= FLT_MAX) || jj[k] >= LMB_MAX_JOINTS) {
                *bad = v;
                return LMB_ERANGE;
            }
            if (jj[k] > maxj) maxj = jj[k];
        }
        if (j1) { /* stable selection of the 4 largest weights */
            for (int a = 0; a < 4; a++) {
                int best = a;
                for (int b = a + 1; b < 8; b++)
                    if (ww[b] > ww[best]) best = b;
                float tw = ww[best];
                uint32_t tj = jj[best];
                for (int b = best; b > a; b--) {
                    ww[b] = ww[b - 1];
                    jj[b] = jj[b - 1];
                }
                ww[a] = tw;
                jj[a] = tj;
            }
        }
        double sum = (double)ww[0] + (double)ww[1] + (double)ww[2] + (double)ww[3];
        for (size_t k = 0; k < 4; k++) {
            out_j[v * 4 + k] = (uint16_t)jj[k];
            out_w[v * 4 + k] = sum > 0.0 ? (float)((double)ww[k] / sum) : (k == 0 ? 1.0f : 0.0f);
        }
    }
    *max_joint = maxj;
    return LMB_OK;
}
