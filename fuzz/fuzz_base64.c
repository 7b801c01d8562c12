/* fuzz_base64.c: the base64 decoder (lmb_base64_decode) on raw text.
 * Oracles: the output fits lmb_base64_max(len) (the buffer is exactly that
 * big, so ASan sees any overrun); valid input decodes to what a simple
 * reference decoder gives; invalid input gets a message. */
#include <string.h>

#include "fuzz.h"
#include "gltf.h"

/* Reference: 4 characters -> 3 bytes, '=' only as the last 1 or 2
 * characters of the text; returns -1 for invalid text. Stricter than the
 * kernel only in where '=' may stand, so it is used one way: when the
 * reference accepts, the kernel must accept with the same bytes. */
static long ref_decode(const char *in, size_t len, uint8_t *out) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t pad = 0;
    while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
        pad++;
    size_t body = len - pad;
    if (body % 4 == 1) return -1;
    if (pad && (body + pad) % 4 != 0) return -1;
    long n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < body; i++) {
        const char *c = in[i] ? strchr(abc, in[i]) : NULL;
        if (!c) return -1;
        acc = (acc << 6) | (uint32_t)(c - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

int lmb_fuzz_base64(const uint8_t *data, size_t size) {
    char *in = (char *)calloc(size ? size : 1, 1);
    size_t cap = lmb_base64_max(size);
    uint8_t *out = (uint8_t *)malloc(cap);
    uint8_t *ref = (uint8_t *)malloc(cap);
    if (!in || !out || !ref) goto done;
    if (size) memcpy(in, data, size);
    char err[128];
    size_t n = (size_t)-1;
    lmb_status st = lmb_base64_decode(in, size, out, &n, err, sizeof err);
    long rn = ref_decode(in, size, ref);
    if (st == LMB_OK) {
        if (n > cap) lmb_fuzz_fail("decoded %zu bytes into %zu", n, cap);
    } else if (!memchr(err, 0, sizeof err) || err[0] == 0) {
        lmb_fuzz_fail("no error message");
    }
    if (rn >= 0) {
        if (st != LMB_OK) lmb_fuzz_fail("valid base64 refused: %s", err);
        if ((size_t)rn != n || (n && memcmp(out, ref, n) != 0))
            lmb_fuzz_fail("decoded bytes differ from the reference");
    }
done:
    free(in);
    free(out);
    free(ref);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_base64)
