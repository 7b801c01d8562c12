/* fuzz_accessor.c: accessor checks and decoding (lmb_accessor_check,
 * lmb_accessor_read_f32, lmb_accessor_read_u32) with arbitrary
 * descriptions, including offsets, strides and counts near SIZE_MAX.
 * Input: a description (see fz_accessor) then the buffer bytes.
 * Oracles: a checked accessor only reads inside its bufferView and buffer,
 * and decodes to the values a plain reference decoder gives. */
#include "fuzz_access.h"

int lmb_fuzz_accessor(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    size_t head = size < 40 ? size : 40;
    size_t buf_len = size - head;
    uint8_t *buf = (uint8_t *)malloc(buf_len ? buf_len : 1);
    if (!buf) return 0;
    memcpy(buf, data + head, buf_len);
    r.n = head;
    lmb_accessor a;
    int want_int;
    fz_accessor(&r, &a, buf, buf_len, &want_int);
    char err[256];
    err[0] = 0;
    if (lmb_accessor_check(&a, want_int, err, sizeof err) != LMB_OK) {
        if (!err[0]) lmb_fuzz_fail("no error message");
        free(buf);
        return 0;
    }
    if (a.count > LMB_GLTF_MAX_COUNT) lmb_fuzz_fail("count above the limit accepted");
    size_t total = a.count * a.components;
    if (total > ((size_t)1 << 22)) { /* only without data: zeros; too big to fuzz quickly */
        if (a.data) lmb_fuzz_fail("%zu elements accepted from %zu bytes", a.count, buf_len);
        free(buf);
        return 0;
    }
    float *f = (float *)malloc(total * sizeof(float));
    uint32_t *u = (uint32_t *)malloc(total * sizeof(uint32_t));
    if (f && u) {
        size_t bad = (size_t)-1;
        lmb_status st = lmb_accessor_read_f32(&a, f, &bad);
        int is_int = a.component_type != LMB_GLTF_F32 && !a.normalized;
        if (is_int) lmb_accessor_read_u32(&a, u);
        fz_check_decoded(&a, f, st, bad, is_int ? u : NULL);
    }
    free(f);
    free(u);
    free(buf);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_accessor)
