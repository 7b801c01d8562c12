/* fuzz_glb.c: the GLB container parser (lmb_glb_parse) on raw file bytes.
 * Oracle: on success both chunks lie inside the input, the JSON chunk comes
 * first, and the error text is a NUL-terminated string either way. */
#include <string.h>

#include "fuzz.h"
#include "gltf.h"

int lmb_fuzz_glb(const uint8_t *data, size_t size) {
    char err[256];
    memset(err, 'x', sizeof err);
    lmb_glb g;
    /* a private copy: any read outside it is an ASan report */
    uint8_t *copy = (uint8_t *)malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    lmb_status st = lmb_glb_parse(copy, size, &g, err, sizeof err);
    if (st == LMB_OK) {
        if (!g.json || g.json < copy + 20 || g.json_len > size || g.json + g.json_len > copy + size)
            lmb_fuzz_fail("JSON chunk outside the input");
        if (g.bin &&
            (g.bin < g.json + g.json_len || g.bin_len > size || g.bin + g.bin_len > copy + size))
            lmb_fuzz_fail("BIN chunk outside the input");
        if (!g.bin && g.bin_len) lmb_fuzz_fail("BIN length without a chunk");
        volatile uint8_t sink = 0;
        if (g.json_len) sink ^= g.json[0] ^ g.json[g.json_len - 1];
        if (g.bin_len) sink ^= g.bin[0] ^ g.bin[g.bin_len - 1];
        (void)sink;
    } else if (!memchr(err, 0, sizeof err) || err[0] == 0) {
        lmb_fuzz_fail("no error message");
    }
    free(copy);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_glb)
