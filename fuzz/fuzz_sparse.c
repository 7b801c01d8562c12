/* fuzz_sparse.c: sparse accessors the way the loader builds them: a base
 * accessor, an index accessor and a value accessor over one buffer, then
 * lmb_sparse_apply_f32 / lmb_sparse_apply_u32.
 * Input: base description, sparse count, index component type, index and
 * value views (see fz_accessor), then the buffer bytes.
 * Oracles: indices that are out of range or not increasing are refused
 * with the first bad one named; otherwise exactly the listed elements are
 * replaced by the listed values. */
#include "fuzz_access.h"

static void read_view(fz_reader *r, lmb_accessor *a) {
    a->view_offset = fz_size(r, 256);
    a->view_length = fz_size(r, 4096);
    a->offset = fz_size(r, 64);
}

int lmb_fuzz_sparse(const uint8_t *data, size_t size) {
    size_t head = size < 96 ? size : 96, buf_len = size - head;
    uint8_t *buf = (uint8_t *)malloc(buf_len ? buf_len : 1);
    if (!buf) return 0;
    memcpy(buf, data + head, buf_len);
    fz_reader r = {data, head};
    lmb_accessor a, si, sv;
    int want_int;
    fz_accessor(&r, &a, buf, buf_len, &want_int);
    size_t n = fz_size(&r, 64);
    memset(&si, 0, sizeof si);
    memset(&sv, 0, sizeof sv);
    si.component_type = (uint32_t[]){LMB_GLTF_U8, LMB_GLTF_U16, LMB_GLTF_U32}[fz_u8(&r) % 3];
    si.components = 1;
    si.count = n;
    si.data = buf;
    si.data_len = buf_len;
    read_view(&r, &si);
    sv = a;
    sv.count = n;
    sv.data = buf;
    sv.data_len = buf_len;
    sv.view_stride = 0;
    read_view(&r, &sv);
    char err[256];
    float *f = NULL, *fv = NULL;
    uint32_t *u = NULL, *uv = NULL, *idx = NULL, *before = NULL;
    if (lmb_accessor_check(&a, want_int, err, sizeof err) != LMB_OK) goto done;
    if (n < 1 || n > a.count) goto done; /* the binding refuses these first */
    if (lmb_accessor_check(&si, 1, err, sizeof err) != LMB_OK) goto done;
    if (lmb_accessor_check(&sv, want_int, err, sizeof err) != LMB_OK) goto done;
    size_t total = a.count * a.components;
    if (total > ((size_t)1 << 20)) goto done; /* zeros without data: too big to fuzz quickly */
    idx = (uint32_t *)malloc(n * sizeof(uint32_t));
    before = (uint32_t *)malloc(total * sizeof(uint32_t));
    if (!idx || !before) goto done;
    lmb_accessor_read_u32(&si, idx);
    fz_check_decoded(&si, NULL, LMB_OK, 0, idx);
    size_t first_bad = (size_t)-1;
    for (size_t k = 0; k < n && first_bad == (size_t)-1; k++)
        if (idx[k] >= a.count || (k && idx[k] <= idx[k - 1])) first_bad = k;
    size_t bad = (size_t)-1;
    lmb_status st;
    if (want_int) {
        u = (uint32_t *)malloc(total * sizeof(uint32_t));
        uv = (uint32_t *)malloc(n * a.components * sizeof(uint32_t));
        if (!u || !uv) goto done;
        lmb_accessor_read_u32(&a, u);
        lmb_accessor_read_u32(&sv, uv);
        memcpy(before, u, total * sizeof(uint32_t));
        st = lmb_sparse_apply_u32(u, a.count, a.components, idx, uv, n, &bad);
    } else {
        f = (float *)malloc(total * sizeof(float));
        fv = (float *)malloc(n * a.components * sizeof(float));
        if (!f || !fv) goto done;
        if (lmb_accessor_read_f32(&a, f, &bad) != LMB_OK) goto done;
        if (lmb_accessor_read_f32(&sv, fv, &bad) != LMB_OK) goto done;
        memcpy(before, f, total * sizeof(float));
        st = lmb_sparse_apply_f32(f, a.count, a.components, idx, fv, n, &bad);
    }
    const uint32_t *out = want_int ? u : (const uint32_t *)(const void *)f;
    const uint32_t *vals = want_int ? uv : (const uint32_t *)(const void *)fv;
    if (first_bad != (size_t)-1) {
        if (st != LMB_ERANGE || bad != first_bad)
            lmb_fuzz_fail("bad sparse index %zu not reported (status %d, bad %zu)", first_bad,
                          (int)st, bad);
        if (memcmp(out, before, total * sizeof(uint32_t)) != 0)
            lmb_fuzz_fail("refused sparse substitution changed the output");
        goto done;
    }
    if (st != LMB_OK) lmb_fuzz_fail("valid sparse indices refused");
    size_t k = 0;
    for (size_t e = 0; e < a.count; e++) {
        const uint32_t *want = before + e * a.components;
        if (k < n && idx[k] == e) want = vals + k++ * a.components;
        if (memcmp(out + e * a.components, want, a.components * sizeof(uint32_t)) != 0)
            lmb_fuzz_fail("element %zu wrong after sparse substitution", e);
    }
done:
    free(f);
    free(fv);
    free(u);
    free(uv);
    free(idx);
    free(before);
    free(buf);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_sparse)
