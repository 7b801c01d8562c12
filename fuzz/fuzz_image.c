/* fuzz_image.c: the demo rasteriser and PNG writer (image.h) with hostile
 * geometry: points and view matrices with huge, infinite or NaN values
 * (points can come from raw Buffer bytes), degenerate triangles, lines of
 * any length, then the PNG encoder.
 * Input: image size, view matrix, line width, then points (3 floats each).
 * Oracles: nothing is written outside the image (ASan), no float-to-int
 * overflow (UBSan), and the PNG fits lmb_png_bound and its stored deflate
 * blocks hold exactly the image's pixels. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "image.h"

static float fz_float(fz_reader *r, int raw) {
    if (raw) {
        uint32_t bits = fz_u32(r);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    return ((float)fz_u8(r) - 128.0f) / 4.0f;
}

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void check_png(const lmb_image *img, const uint8_t *png, size_t n, size_t bound) {
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (n > bound) lmb_fuzz_fail("PNG of %zu bytes over the bound %zu", n, bound);
    if (n < 8 + 25 + 12 + 12 || memcmp(png, sig, 8) != 0) lmb_fuzz_fail("PNG signature");
    const uint8_t *p = png + 8 + 25; /* IDAT */
    size_t len = be32(p);
    if (memcmp(p + 4, "IDAT", 4) != 0 || 8 + 25 + 12 + len + 12 != n) lmb_fuzz_fail("IDAT chunk");
    const uint8_t *d = p + 8 + 2, *end = p + 8 + len - 4;
    size_t row = (size_t)img->w * 3 + 1, pos = 0, raw = row * img->h;
    int last = 0;
    while (!last) {
        if (d + 5 > end) lmb_fuzz_fail("deflate block header past the end");
        last = d[0] & 1;
        size_t bl = (size_t)d[1] | ((size_t)d[2] << 8);
        if ((uint16_t)~bl != (uint16_t)(d[3] | (d[4] << 8))) lmb_fuzz_fail("block NLEN");
        d += 5;
        if (d + bl > end || pos + bl > raw) lmb_fuzz_fail("block past the end");
        for (size_t k = 0; k < bl; k++, pos++) {
            size_t y = pos / row, x = pos % row;
            uint8_t want = x == 0 ? 0 : img->rgba[(y * img->w + (x - 1) / 3) * 4 + (x - 1) % 3];
            if (d[k] != want) lmb_fuzz_fail("pixel byte %zu", pos);
        }
        d += bl;
    }
    if (pos != raw || d != end) lmb_fuzz_fail("PNG holds %zu of %zu bytes", pos, raw);
}

int lmb_fuzz_image(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    uint8_t flags = fz_u8(&r);
    uint32_t w = 1u + fz_u8(&r) % 48, h = 1u + fz_u8(&r) % 48;
    uint32_t width = 1u + fz_u8(&r) % 15;
    float view[16], light[3];
    for (int k = 0; k < 16; k++) {
        view[k] = fz_float(&r, flags & 1);
        if (!isfinite(view[k])) view[k] = 1.0f; /* the binding refuses these */
    }
    for (int k = 0; k < 3; k++)
        light[k] = fz_float(&r, 0);
    float len = sqrtf(light[0] * light[0] + light[1] * light[1] + light[2] * light[2]);
    if (!(len > 0.0f)) light[0] = len = 1.0f;
    for (int k = 0; k < 3; k++)
        light[k] /= len;
    size_t count = r.n / ((flags & 2) ? 12 : 3);
    if (count > 3000) count = 3000;
    float *pts = (float *)malloc((count ? count : 1) * 3 * sizeof(float));
    void *mem = malloc(lmb_image_bytes(w, h) + 16);
    size_t bound = lmb_png_bound(w, h);
    uint8_t *png = (uint8_t *)malloc(bound);
    if (!pts || !mem || !png) goto done;
    for (size_t k = 0; k < count * 3; k++)
        pts[k] = fz_float(&r, flags & 2);
    lmb_image *img = lmb_image_place(lmb_align_ptr(mem, 16), w, h);
    static const uint8_t bg[4] = {10, 20, 30, 255}, fg[4] = {200, 100, 50, 255};
    lmb_image_clear(img, bg);
    lmb_image_triangles(img, view, pts, 3, (uint32_t)count, NULL, (uint32_t)(count / 3), fg, light);
    lmb_image_lines(img, view, pts, (uint32_t)count, fg, width);
    check_png(img, png, lmb_png_encode(img, png), bound);
done:
    free(pts);
    free(mem);
    free(png);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_image)
