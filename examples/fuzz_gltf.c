/* fuzz_gltf.c: libFuzzer harness for the glTF byte decoders (csrc/gltf.c),
 * possible because the kernel has no Lua. Not part of the normal build:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Icsrc -DCGLM_ALL_UNALIGNED \
 *       examples/fuzz_gltf.c csrc/gltf.c -lm -o build/fuzz_gltf
 *   build/fuzz_gltf -max_total_time=60
 *
 * Each input is used three ways: as a GLB file, as base64 text, and as an
 * accessor description (its first 24 bytes) over a buffer (the rest). */
#include <stdlib.h>
#include <string.h>

#include "gltf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    lmb_glb g;
    if (lmb_glb_parse(data, size, &g, err, sizeof err) == LMB_OK) {
        volatile uint8_t sink = 0; /* read the chunk ends: ASan checks they are in the input */
        if (g.json_len) sink ^= g.json[g.json_len - 1];
        if (g.bin_len) sink ^= g.bin[g.bin_len - 1];
        (void)sink;
    }

    uint8_t *b64 = malloc(lmb_base64_max(size) + 1);
    size_t n = 0;
    if (b64) {
        (void)lmb_base64_decode((const char *)data, size, b64, &n, err, sizeof err);
        free(b64);
    }

    if (size < 24) return 0;
    static const uint32_t types[] = {LMB_GLTF_I8,  LMB_GLTF_U8,  LMB_GLTF_I16,
                                     LMB_GLTF_U16, LMB_GLTF_U32, LMB_GLTF_F32, 7};
    lmb_accessor a;
    memset(&a, 0, sizeof a);
    a.data = data + 24;
    a.data_len = size - 24;
    a.view_offset = data[0] % 64;
    a.view_length = u32_at(data + 4) % 4096;
    a.view_stride = data[1] % 2 ? (size_t)(data[1] & 0xfc) : 0;
    a.offset = data[2] % 32;
    a.component_type = types[data[3] % 7];
    a.is_matrix = data[8] & 1;
    a.components = a.is_matrix ? (uint32_t[]){4, 9, 16}[data[9] % 3] : 1u + data[9] % 4;
    a.normalized = data[10] & 1;
    a.count = u32_at(data + 12) % 100000;
    int want_int = data[11] & 1;
    if (data[16] & 1) a.data = NULL;
    if (lmb_accessor_check(&a, want_int, err, sizeof err) != LMB_OK) return 0;
    size_t total = a.count * a.components;
    if (want_int) {
        uint32_t *out = malloc(total * sizeof(uint32_t));
        if (!out) return 0;
        lmb_accessor_read_u32(&a, out);
        if (a.components == 4) {
            uint16_t *oj = malloc(a.count * 4 * sizeof(uint16_t));
            float *w = calloc(a.count * 4, sizeof(float));
            float *ow = malloc(a.count * 4 * sizeof(float));
            uint32_t maxj;
            size_t bad;
            if (oj && w && ow)
                (void)lmb_skin_influences(a.count, out, w, NULL, NULL, oj, ow, &maxj, &bad);
            free(oj);
            free(w);
            free(ow);
        }
        free(out);
    } else {
        float *out = malloc(total * sizeof(float));
        size_t bad;
        if (!out) return 0;
        (void)lmb_accessor_read_f32(&a, out, &bad);
        free(out);
    }
    return 0;
}
