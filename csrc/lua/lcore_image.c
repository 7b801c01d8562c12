/* lcore_image.c: the limber.Image type (software raster + PNG) used by the
 * demo to draw real skinned vertices and joint matrices. */
#include <math.h>
#include <string.h>

#include "image.h"
#include "lcore.h"

#define IMAGE_MT "limber.Image"

static lmb_image *check_image(lua_State *L, int arg) {
    return (lmb_image *)lmb_align_ptr(luaL_checkudata(L, arg, IMAGE_MT), 64);
}

/** core.image(w, h): a w x h RGB image with a depth buffer, cleared to black. */
static int l_image_new(lua_State *L) {
    lua_Integer w = luaL_checkinteger(L, 1), h = luaL_checkinteger(L, 2);
    luaL_argcheck(L, w >= 1 && w <= LMB_IMAGE_MAX_SIDE, 1, "width out of range [1, 8192]");
    luaL_argcheck(L, h >= 1 && h <= LMB_IMAGE_MAX_SIDE, 2, "height out of range [1, 8192]");
    void *mem = lcore_newobject(L, lmb_image_bytes((uint32_t)w, (uint32_t)h), 0, IMAGE_MT);
    lmb_image *img = lmb_image_place(mem, (uint32_t)w, (uint32_t)h);
    static const uint8_t black[4] = {0, 0, 0, 255};
    lmb_image_clear(img, black);
    return 1;
}

static void check_color(lua_State *L, int arg, uint8_t out[4]) {
    luaL_checktype(L, arg, LUA_TTABLE);
    for (int k = 0; k < 3; k++) {
        lua_rawgeti(L, arg, k + 1);
        int isnum;
        lua_Number v = lua_tonumberx(L, -1, &isnum);
        lua_pop(L, 1);
        if (!isnum || !(v >= 0 && v <= 255))
            luaL_argerror(L, arg, "color must be {r, g, b} with numbers in [0, 255]");
        out[k] = (uint8_t)v;
    }
    out[3] = 255;
}

/* Points as a float array: a Buffer (f32, width >= 3, stride = width) or a
 * flat table of x, y, z numbers (copied into a temporary userdata). */
static const float *check_points(lua_State *L, int arg, uint32_t *count, uint32_t *stride) {
    lbuffer *b = lbuf_check(L, arg);
    if (b->type != LBUF_F32 || b->width < 3)
        luaL_argerror(L, arg, "points must be an f32 buffer of width 3 or more");
    if (b->count > UINT32_MAX) luaL_argerror(L, arg, "too many points");
    *count = (uint32_t)b->count;
    *stride = b->width;
    return (const float *)b->data;
}

/* Converts a flat table at arg into an f32 width-3 Buffer in place. */
static void table_to_points(lua_State *L, int arg) {
    if (!lua_istable(L, arg)) return;
    lua_Integer n = lcore_rawlen(L, arg);
    if (n % 3 != 0) luaL_argerror(L, arg, "point table length must be a multiple of 3");
    lbuffer *b = lbuf_push(L, LBUF_F32, 3, (size_t)(n / 3));
    lcore_read_floats(L, arg, "points", 1, (float *)b->data, (size_t)n);
    lua_replace(L, arg);
}

static void check_view(lua_State *L, int arg, float view[16]) {
    lcore_read_floats(L, arg, "view matrix", 1, view, 16);
}

/** img:triangles(points, indices, view, color [, light [, base]]): fills
 * triangles (flat shaded) with a depth test. points: f32 Buffer (width >= 3)
 * or flat table; indices: u32 Buffer of 0-based vertex indices (3 per
 * triangle) or nil for consecutive triples; base: a vertex offset added to
 * every index (to draw one instance of a batched skinning output). */
static int l_image_triangles(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    table_to_points(L, 2);
    uint32_t count = 0, stride = 3;
    const float *pos = check_points(L, 2, &count, &stride);
    const uint32_t *idx = NULL;
    uint32_t tris = count / 3;
    lua_Integer base = luaL_optinteger(L, 7, 0);
    if (base < 0 || base > (lua_Integer)count)
        return luaL_argerror(
            L, 7, lua_pushfstring(L, "base %I out of range [0, %I]", base, (lua_Integer)count));
    pos += (size_t)base * stride;
    count -= (uint32_t)base;
    if (lua_isnil(L, 3)) tris = count / 3;
    if (!lua_isnil(L, 3)) {
        lbuffer *ib = lbuf_check(L, 3);
        if (ib->type != LBUF_U32 || ib->width != 1)
            return luaL_argerror(L, 3, "indices must be a u32 buffer of width 1");
        if (ib->count % 3 != 0 || ib->count / 3 > UINT32_MAX)
            return luaL_argerror(L, 3, "index count must be a multiple of 3");
        idx = (const uint32_t *)ib->data;
        tris = (uint32_t)(ib->count / 3);
        for (size_t k = 0; k < ib->count; k++)
            if (idx[k] >= count)
                return luaL_argerror(
                    L, 3,
                    lua_pushfstring(L, "index %I = %I is not below the vertex count %I",
                                    (lua_Integer)k + 1, (lua_Integer)idx[k], (lua_Integer)count));
    }
    float view[16], light[3] = {0.3f, 0.5f, 0.8f};
    check_view(L, 4, view);
    uint8_t color[4];
    check_color(L, 5, color);
    if (!lua_isnoneornil(L, 6)) lcore_read_floats(L, 6, "light", 1, light, 3);
    float len = sqrtf(light[0] * light[0] + light[1] * light[1] + light[2] * light[2]);
    if (!(len > 0)) return luaL_argerror(L, 6, "light direction is zero");
    for (int k = 0; k < 3; k++)
        light[k] /= len;
    lmb_image_triangles(img, view, pos, stride, count, idx, tris, color, light);
    return 0;
}

/** img:lines(points, view, color [, width]): segments between consecutive
 * pairs of points, drawn on top. */
static int l_image_lines(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    table_to_points(L, 2);
    uint32_t count = 0, stride = 3;
    const float *pts = check_points(L, 2, &count, &stride);
    if (stride != 3) return luaL_argerror(L, 2, "line points must have width 3");
    float view[16];
    check_view(L, 3, view);
    uint8_t color[4];
    check_color(L, 4, color);
    lua_Integer width = luaL_optinteger(L, 5, 1);
    luaL_argcheck(L, width >= 1 && width <= 15, 5, "line width out of range [1, 15]");
    lmb_image_lines(img, view, pts, count, color, (uint32_t)width);
    return 0;
}

/** img:clear(color) */
static int l_image_clear(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    uint8_t color[4];
    check_color(L, 2, color);
    lmb_image_clear(img, color);
    return 0;
}

/** img:pixel(x, y): r, g, b of a pixel (1-based coordinates). */
static int l_image_pixel(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    uint32_t x = lcore_check_index(L, 2, img->w, "x");
    uint32_t y = lcore_check_index(L, 3, img->h, "y");
    const uint8_t *p = img->rgba + ((size_t)y * img->w + x) * 4;
    for (int k = 0; k < 3; k++)
        lua_pushinteger(L, p[k]);
    return 3;
}

/** img:png(): the image as PNG file bytes (a Lua string). */
static int l_image_png(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    uint8_t *buf = (uint8_t *)lua_newuserdatauv(L, lmb_png_bound(img->w, img->h), 0);
    size_t n = lmb_png_encode(img, buf);
    lua_pushlstring(L, (const char *)buf, n);
    return 1;
}

/** img:size(): width, height. */
static int l_image_size(lua_State *L) {
    lmb_image *img = check_image(L, 1);
    lua_pushinteger(L, img->w);
    lua_pushinteger(L, img->h);
    return 2;
}

void lcore_open_image(lua_State *L) {
    static const luaL_Reg methods[] = {{"triangles", l_image_triangles},
                                       {"lines", l_image_lines},
                                       {"clear", l_image_clear},
                                       {"pixel", l_image_pixel},
                                       {"png", l_image_png},
                                       {"size", l_image_size},
                                       {NULL, NULL}};
    lcore_class(L, IMAGE_MT, NULL, methods);
    lua_pushcfunction(L, l_image_new);
    lua_setfield(L, -2, "image");
}
