/* lcore_gltf.c: Lua binding of the glTF byte decoders (gltf.h). The JSON
 * side lives in lua/limber/gltf.lua, which passes byte strings and plain
 * accessor descriptions; every failure raises "limber.gltf: <where>: <why>"
 * before any object is returned. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* O_NOFOLLOW, O_CLOEXEC */
#endif
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath */
#endif
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define LMB_HAVE_POSIX_FILES 1
#endif

#include "gltf.h"
#include "lcore.h"

#define ERRLEN 256

/* Raises a content error as is: "limber.gltf: <where>: <why>" with no
 * source position prefix (the location is the path inside the file). */
static int gerr(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return lua_error(L);
}

/** core.gltf_glb(bytes): the JSON chunk and the BIN chunk (or nil) of a
 * GLB file, as strings. */
static int l_glb(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lmb_glb g;
    char err[ERRLEN];
    if (lmb_glb_parse((const uint8_t *)s, len, &g, err, sizeof err) != LMB_OK)
        return gerr(L, "limber.gltf: %s", err);
    lua_pushlstring(L, (const char *)g.json, g.json_len);
    if (g.bin)
        lua_pushlstring(L, (const char *)g.bin, g.bin_len);
    else
        lua_pushnil(L);
    return 2;
}

/** core.gltf_base64(where, text): the decoded bytes of base64 text. */
static int l_base64(lua_State *L) {
    const char *where = luaL_checkstring(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    luaL_Buffer b;
    uint8_t *out = (uint8_t *)luaL_buffinitsize(L, &b, lmb_base64_max(len));
    size_t n = 0;
    char err[ERRLEN];
    if (lmb_base64_decode(s, len, out, &n, err, sizeof err) != LMB_OK)
        return gerr(L, "limber.gltf: %s: %s", where, err);
    luaL_pushresultsize(&b, n);
    return 1;
}

/* Reads a non-negative integer field (absent: def). */
static size_t size_field(lua_State *L, int t, const char *k, lua_Integer def, const char *where) {
    lcore_rawfield(L, t, k);
    int ok = 1;
    lua_Integer v = lua_isnil(L, -1) ? def : lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < 0 || v > ((lua_Integer)1 << 53))
        gerr(L, "limber.gltf: %s: %s must be a non-negative integer", where, k);
    return (size_t)v;
}

/* Fills an accessor description from the table at t. Its data string is
 * kept alive in the table at `anchor`, entry `slot`: a __gc run by a later
 * allocation may take it out of the caller's table. */
static void read_desc(lua_State *L, int t, lmb_accessor *a, const char *where, int anchor,
                      int slot) {
    memset(a, 0, sizeof *a);
    lcore_rawfield(L, t, "data");
    if (!lua_isnil(L, -1)) {
        size_t len;
        a->data = (const uint8_t *)luaL_checklstring(L, -1, &len);
        lua_pushvalue(L, -1);
        lua_rawseti(L, anchor, slot);
        a->data_len = size_field(L, t, "data_len", (lua_Integer)len, where);
        if (a->data_len > len) a->data_len = len;
    }
    lua_pop(L, 1);
    a->view_offset = size_field(L, t, "view_offset", 0, where);
    a->view_length = size_field(L, t, "view_length", 0, where);
    a->view_stride = size_field(L, t, "view_stride", 0, where);
    a->offset = size_field(L, t, "offset", 0, where);
    a->component_type = (uint32_t)size_field(L, t, "component_type", 0, where);
    a->components = (uint32_t)size_field(L, t, "components", 1, where);
    a->count = size_field(L, t, "count", 0, where);
    lcore_rawfield(L, t, "is_matrix");
    a->is_matrix = (uint32_t)lua_toboolean(L, -1);
    lcore_rawfield(L, t, "normalized");
    a->normalized = (uint32_t)lua_toboolean(L, -1);
    lua_pop(L, 2);
}

static void check_desc(lua_State *L, const lmb_accessor *a, int want_int, const char *where) {
    char err[ERRLEN];
    if (lmb_accessor_check(a, want_int, err, sizeof err) != LMB_OK)
        gerr(L, "limber.gltf: %s: %s", where, err);
}

/** core.gltf_accessor(where, desc, kind): decodes an accessor into a new
 * Buffer: kind "f32" (floats, normalized integers mapped to [-1, 1]) or
 * "u32" (integer components only). desc.sparse, when present, is
 * { count =, indices = {data, view_offset, view_length, offset,
 * component_type}, values = {data, view_offset, view_length, offset} }. */
static int l_accessor(lua_State *L) {
    static const char *const kinds[] = {"f32", "u32", NULL};
    const char *where = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int kind = luaL_checkoption(L, 3, NULL, kinds);
    lua_settop(L, 3);
    lua_createtable(L, 3, 0); /* 4: the data strings read (read_desc) */
    lmb_accessor a;
    read_desc(L, 2, &a, where, 4, 1);
    check_desc(L, &a, kind == 1, where);

    /* sparse parts, checked before anything is allocated */
    lmb_accessor si, sv;
    size_t sparse_n = 0;
    int has_sparse = lcore_rawfield(L, 2, "sparse") == LUA_TTABLE; /* 5 */
    if (has_sparse) {
        sparse_n = size_field(L, 5, "count", 0, where);
        if (sparse_n < 1 || sparse_n > a.count)
            return gerr(L, "limber.gltf: %s: sparse.count %I out of range [1, %I]", where,
                        (lua_Integer)sparse_n, (lua_Integer)a.count);
        lua_pushfstring(L, "%s.sparse.indices", where); /* 6 */
        lcore_rawfield(L, 5, "indices");                /* 7 */
        luaL_checktype(L, 7, LUA_TTABLE);
        read_desc(L, 7, &si, lua_tostring(L, 6), 4, 2);
        si.components = 1;
        si.count = sparse_n;
        if (!(si.component_type == LMB_GLTF_U8 || si.component_type == LMB_GLTF_U16 ||
              si.component_type == LMB_GLTF_U32))
            return gerr(L, "limber.gltf: %s: componentType %d must be 5121, 5123 or 5125",
                        lua_tostring(L, 6), (int)si.component_type);
        if (!si.data) return gerr(L, "limber.gltf: %s: missing bufferView", lua_tostring(L, 6));
        check_desc(L, &si, 1, lua_tostring(L, 6));
        lua_pushfstring(L, "%s.sparse.values", where); /* 8 */
        lcore_rawfield(L, 5, "values");                /* 9 */
        luaL_checktype(L, 9, LUA_TTABLE);
        read_desc(L, 9, &sv, lua_tostring(L, 8), 4, 3);
        sv.component_type = a.component_type;
        sv.components = a.components;
        sv.is_matrix = a.is_matrix;
        sv.normalized = a.normalized;
        sv.count = sparse_n;
        if (!sv.data) return gerr(L, "limber.gltf: %s: missing bufferView", lua_tostring(L, 8));
        check_desc(L, &sv, kind == 1, lua_tostring(L, 8));
    }
    lua_settop(L, 9);

    size_t bad = 0;
    lbuffer *out = lbuf_push(L, kind == 0 ? LBUF_F32 : LBUF_U32, a.components, a.count); /* 10 */
    if (kind == 0) {
        if (lmb_accessor_read_f32(&a, (float *)out->data, &bad) != LMB_OK)
            return gerr(L, "limber.gltf: %s: element %I is NaN or infinite", where,
                        (lua_Integer)bad);
    } else {
        lmb_accessor_read_u32(&a, (uint32_t *)out->data);
    }
    if (has_sparse) {
        uint32_t *idx = (uint32_t *)lua_newuserdatauv(L, sparse_n * sizeof(uint32_t), 0);
        lmb_accessor_read_u32(&si, idx);
        lmb_status st;
        if (kind == 0) {
            float *vals = (float *)lua_newuserdatauv(L, sparse_n * a.components * sizeof(float), 0);
            if (lmb_accessor_read_f32(&sv, vals, &bad) != LMB_OK)
                return gerr(L, "limber.gltf: %s.sparse.values: element %I is NaN or infinite",
                            where, (lua_Integer)bad);
            st = lmb_sparse_apply_f32((float *)out->data, a.count, a.components, idx, vals,
                                      sparse_n, &bad);
        } else {
            uint32_t *vals =
                (uint32_t *)lua_newuserdatauv(L, sparse_n * a.components * sizeof(uint32_t), 0);
            lmb_accessor_read_u32(&sv, vals);
            st = lmb_sparse_apply_u32((uint32_t *)out->data, a.count, a.components, idx, vals,
                                      sparse_n, &bad);
        }
        if (st != LMB_OK)
            return gerr(L,
                        "limber.gltf: %s.sparse.indices: index %I (%I) is out of range or not "
                        "increasing (count %I)",
                        where, (lua_Integer)bad, (lua_Integer)idx[bad], (lua_Integer)a.count);
        lua_settop(L, 10);
    }
    return 1;
}

static lbuffer *check_typed(lua_State *L, int arg, int type, uint32_t width, const char *what) {
    lbuffer *b = lbuf_check(L, arg);
    if (b->type != type || b->width != width)
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "%s must be a %s buffer of width %d", what,
                                      type == LBUF_F32 ? "f32" : "u32", (int)width));
    return b;
}

/** core.gltf_influences(where, joints0, weights0 [, joints1, weights1]):
 * joints u16 x4 and weights f32 x4 Buffers (4 largest, renormalised) and
 * the largest joint index named (0-based). Inputs: u32 x4 and f32 x4. */
static int l_influences(lua_State *L) {
    const char *where = luaL_checkstring(L, 1);
    lbuffer *j0 = check_typed(L, 2, LBUF_U32, 4, "joints0");
    lbuffer *w0 = check_typed(L, 3, LBUF_F32, 4, "weights0");
    lbuffer *j1 = NULL, *w1 = NULL;
    if (!lua_isnoneornil(L, 4)) {
        j1 = check_typed(L, 4, LBUF_U32, 4, "joints1");
        w1 = check_typed(L, 5, LBUF_F32, 4, "weights1");
    }
    size_t n = j0->count;
    if (w0->count != n || (j1 && (j1->count != n || w1->count != n)))
        return gerr(L, "limber.gltf: %s: JOINTS_n and WEIGHTS_n counts differ", where);
    lua_settop(L, 5);
    lbuffer *oj = lbuf_push(L, LBUF_U16, 4, n);
    lbuffer *ow = lbuf_push(L, LBUF_F32, 4, n);
    uint32_t maxj = 0;
    size_t bad = 0;
    if (lmb_skin_influences(n, (const uint32_t *)j0->data, (const float *)w0->data,
                            j1 ? (const uint32_t *)j1->data : NULL,
                            w1 ? (const float *)w1->data : NULL, (uint16_t *)oj->data,
                            (float *)ow->data, &maxj, &bad) != LMB_OK)
        return gerr(L,
                    "limber.gltf: %s: vertex %I has a negative or infinite weight or a joint index "
                    "above %I",
                    where, (lua_Integer)bad, (lua_Integer)LMB_MAX_JOINTS - 1);
    lua_pushinteger(L, maxj);
    return 3;
}

/** core.gltf_stats(buf): smallest and largest scalar of a f32 or u32
 * buffer, and the first element (1-based) whose first scalar is not
 * strictly greater than the previous one (nil when strictly increasing). */
static int l_stats(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    size_t n = b->count * b->width;
    if (n == 0) return 0;
    double lo = 0, hi = 0, prev = 0;
    size_t first_bad = 0;
    for (size_t k = 0; k < n; k++) {
        double v = b->type == LBUF_F32   ? (double)((const float *)b->data)[k]
                   : b->type == LBUF_U32 ? (double)((const uint32_t *)b->data)[k]
                   : b->type == LBUF_U16 ? (double)((const uint16_t *)b->data)[k]
                                         : (double)((const uint8_t *)b->data)[k];
        if (k == 0 || v < lo) lo = v;
        if (k == 0 || v > hi) hi = v;
        if (k % b->width == 0) {
            if (k > 0 && !first_bad && !(v > prev)) first_bad = k / b->width + 1;
            prev = v;
        }
    }
    lua_pushnumber(L, lo);
    lua_pushnumber(L, hi);
    if (first_bad)
        lua_pushinteger(L, (lua_Integer)first_bad);
    else
        lua_pushnil(L);
    return 3;
}

/** core.gltf_mark_empty(text): the JSON text with every empty object `{}`
 * (outside strings) written as `{"\u0000":null}`, so that after decoding
 * an empty object is a table with one string key and can be told from an
 * empty array (lua-cjson decodes both to an empty table). The loader
 * removes the marker key from every object it reads. Returns the text
 * itself when it has no empty object. */
static int l_mark_empty(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    static const char mark[] = "{\"\\u0000\":null}";
    size_t count = 0;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{') {
            size_t j = i + 1;
            while (j < len && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
                j++;
            if (j < len && s[j] == '}') count++;
        }
    }
    if (count == 0) {
        lua_settop(L, 1);
        return 1;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\' && i + 1 < len) {
                luaL_addchar(&b, c);
                c = s[++i];
            } else if (c == '"') {
                in_str = 0;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{') {
            size_t j = i + 1;
            while (j < len && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
                j++;
            if (j < len && s[j] == '}') {
                luaL_addlstring(&b, mark, sizeof mark - 1);
                i = j;
                continue;
            }
        }
        luaL_addchar(&b, c);
    }
    luaL_pushresult(&b);
    return 1;
}

#ifdef LMB_HAVE_POSIX_FILES
/* Opens `path` for reading without blocking and without making it the
 * controlling terminal, and fstats the open descriptor into *st: a FIFO
 * is opened at once (O_NONBLOCK does not wait for a writer) and a socket
 * fails to open (ENXIO), so nothing here can hang; callers then refuse
 * anything that is not S_ISREG(st->st_mode). The final symlink is
 * followed: callers that must stay inside a folder check the descriptor's
 * own path afterwards (fd_path). Returns the descriptor, or -1 with *why
 * set and errno in *err. */
static int open_stat(const char *path, struct stat *st, const char **why, int *err) {
    *why = NULL;
    *err = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        *err = errno;
        *why = "cannot open";
        return -1;
    }
    if (fstat(fd, st) != 0) {
        *err = errno;
        *why = "cannot stat";
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads up to n bytes of fd into out (restarting on EINTR). Returns the
 * number read (less than n at end of file), or -1 with errno set. */
static ptrdiff_t read_upto(int fd, char *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ptrdiff_t)got;
}

/* The resolved path of the file open on fd, into out (PATH_MAX bytes):
 * what the kernel says the descriptor is (Linux /proc/self/fd, macOS
 * F_GETPATH), so that no rename or symlink swap between a check and the
 * open can fool the check. Elsewhere, or without /proc, the realpath of
 * `path` is taken, and it must name the same file (st_dev, st_ino) as
 * the descriptor *st after that: a swap is then caught unless it is
 * undone between the two calls. Returns 0 on success, else errno. */
static int fd_path(int fd, const char *path, const struct stat *st, char *out) {
#if defined(__linux__)
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(proc, out, PATH_MAX - 1);
    if (len > 0 && out[0] == '/') {
        out[len] = '\0';
        return 0;
    }
#elif defined(__APPLE__) && defined(F_GETPATH)
    if (fcntl(fd, F_GETPATH, out) != -1) return 0;
#endif
    if (!realpath(path, out)) return errno;
    struct stat again;
    if (stat(out, &again) != 0) return errno;
    if (again.st_dev != st->st_dev || again.st_ino != st->st_ino) return ENOENT;
    return 0;
}

/* 1 when the resolved path `file` is `dir` or inside it (dir resolved too). */
static int path_inside(const char *file, const char *dir) {
    size_t dl = strlen(dir);
    return strncmp(file, dir, dl) == 0 &&
           (file[dl] == '/' || file[dl] == '\0' || (dl > 0 && dir[dl - 1] == '/'));
}
#endif

/** core.gltf_read_file(where, dir, path, n): the first n bytes of the
 * external buffer file `path` (dir .. uri, already checked by the caller
 * for schemes, absolute paths and '..' segments). Only a regular file
 * whose resolved path (every symlink followed) is inside the resolved
 * `dir` may be read, and never more than n bytes; a shorter file is an
 * error. The check is made on the open descriptor, not on the name before
 * opening: the file is opened first (O_NONBLOCK, so a FIFO does not wait
 * for a writer; fstat then refuses anything but a regular file), and the
 * descriptor's own path (fd_path) must be inside `dir`; nothing swapped in
 * between a check and the open can be read. The n-byte buffer is
 * allocated before the file is opened, so no Lua error can leak the
 * descriptor; the caller has counted n against max_bytes. */
static int l_read_file(lua_State *L) {
    const char *where = luaL_checkstring(L, 1);
    const char *dir = luaL_checkstring(L, 2);
    const char *path = luaL_checkstring(L, 3);
    lua_Integer want = luaL_checkinteger(L, 4);
    if (want < 0 || (lua_Unsigned)want > (lua_Unsigned)(SIZE_MAX / 2))
        return luaL_argerror(L, 4, "byte count out of range");
#ifdef LMB_HAVE_POSIX_FILES
    char rdir[PATH_MAX], rfile[PATH_MAX];
    if (!realpath(dir, rdir))
        return gerr(L, "limber.gltf: %s: cannot resolve the model folder '%s': %s", where, dir,
                    strerror(errno));
    size_t n = (size_t)want;
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, n > 0 ? n : 1);
    struct stat st;
    const char *why;
    int err;
    int fd = open_stat(path, &st, &why, &err);
    if (fd < 0) return gerr(L, "limber.gltf: %s: %s '%s': %s", where, why, path, strerror(err));
    err = fd_path(fd, path, &st, rfile);
    if (err) {
        close(fd);
        return gerr(L, "limber.gltf: %s: cannot resolve '%s': %s", where, path, strerror(err));
    }
    if (!path_inside(rfile, rdir)) {
        close(fd);
        return gerr(L, "limber.gltf: %s: '%s' resolves to '%s', outside the model's folder '%s'",
                    where, path, rfile, rdir);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gerr(L, "limber.gltf: %s: '%s' is not a regular file", where, path);
    }
    ptrdiff_t got = read_upto(fd, out, n);
    err = errno;
    close(fd);
    if (got < 0)
        return gerr(L, "limber.gltf: %s: '%s' cannot read: %s", where, path, strerror(err));
    if ((size_t)got < n)
        return gerr(L, "limber.gltf: %s: byteLength is %I but '%s' has only %I bytes", where,
                    (lua_Integer)n, path, (lua_Integer)got);
    luaL_pushresultsize(&b, n);
    return 1;
#else
    (void)dir;
    return gerr(L,
                "limber.gltf: %s: external buffer '%s': reading files is not supported on this "
                "platform (use a .glb or data: URIs)",
                where, path);
#endif
}

#ifdef LMB_HAVE_POSIX_FILES
/* An uninitialised block of n bytes (argument 1) as a full userdata. */
static int new_block(lua_State *L) {
    size_t n = (size_t)lua_tointeger(L, 1);
    lua_newuserdatauv(L, n > 0 ? n : 1, 0);
    return 1;
}
#endif

/** core.gltf_read_model(fname, path, limit): the bytes of the model file
 * `path`, at most `limit` of them. The path is the caller's own choice, so
 * symlinks are followed (no folder check), but only a regular file is
 * read: it is opened without blocking and checked on the descriptor
 * (open_stat), so a FIFO, a directory, /dev/zero or a socket fails at
 * once. A file larger than `limit` is refused before anything is read.
 * Errors read "<fname>: cannot open '<path>': <why>" and
 * "<fname>: '<path>' is not a regular file". */
static int l_read_model(lua_State *L) {
    const char *fname = luaL_checkstring(L, 1);
    const char *path = luaL_checkstring(L, 2);
    lua_Integer limit = luaL_checkinteger(L, 3);
    luaL_argcheck(L, limit >= 0, 3, "byte limit must be >= 0");
#ifdef LMB_HAVE_POSIX_FILES
    luaL_checkstack(L, 4, "glTF model file");
    struct stat st;
    const char *why;
    int err;
    int fd = open_stat(path, &st, &why, &err);
    if (fd < 0) return gerr(L, "%s: %s '%s': %s", fname, why, path, strerror(err));
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gerr(L, "%s: '%s' is not a regular file", fname, path);
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size > (uintmax_t)limit ||
        (uintmax_t)st.st_size > (uintmax_t)(SIZE_MAX / 2)) {
        close(fd);
        return gerr(L, "%s: '%s' is %I bytes, over the limit of %I bytes (opts.max_bytes)", fname,
                    path, (lua_Integer)st.st_size, limit);
    }
    /* the buffer is allocated in protected mode: a memory error closes the
     * descriptor before it propagates */
    size_t n = (size_t)st.st_size;
    lua_pushcfunction(L, new_block);
    lua_pushinteger(L, (lua_Integer)n);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        close(fd);
        return lua_error(L);
    }
    char *out = (char *)lua_touserdata(L, -1);
    ptrdiff_t got = read_upto(fd, out, n);
    err = errno;
    close(fd);
    if (got < 0) return gerr(L, "%s: '%s' cannot read: %s", fname, path, strerror(err));
    lua_pushlstring(L, out, (size_t)got); /* a file that shrank meanwhile: what is there */
    return 1;
#else
    FILE *f = fopen(path, "rb");
    if (!f) return gerr(L, "%s: cannot open '%s': %s", fname, path, strerror(errno));
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t total = 0;
    char chunk[4096];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        total += r;
        if ((lua_Unsigned)total > (lua_Unsigned)limit) break;
        luaL_addlstring(&b, chunk, r);
    }
    fclose(f);
    if ((lua_Unsigned)total > (lua_Unsigned)limit)
        return gerr(L, "%s: '%s' is over the limit of %I bytes (opts.max_bytes)", fname, path,
                    limit);
    luaL_pushresult(&b);
    return 1;
#endif
}

/* Reads 16 finite numbers of the table at idx (raw access) into m. */
static int read_mat16(lua_State *L, int idx, double *m) {
    if (lua_type(L, idx) != LUA_TTABLE) return 0;
    for (int k = 0; k < 16; k++) {
        int ok = lua_rawgeti(L, idx, k + 1) == LUA_TNUMBER;
        m[k] = ok ? (double)lua_tonumber(L, -1) : 0.0;
        lua_pop(L, 1);
        if (!ok || !isfinite(m[k])) return 0;
    }
    return 1;
}

/** core.gltf_worlds(name, nodes [, locals]): sets nodes[i].world, for
 * every node of a loaded asset, to world(parent) x local (column-major
 * 4x4, double precision), where local is locals[i] when that is given
 * and node.local_matrix otherwise. One pass, any node order: each node is
 * reached once, by walking up to the first finished ancestor with an
 * explicit stack (no recursion, so any depth works). Everything is read
 * once with raw access into C memory and checked (tables, parents in
 * range, no cycles, 16 finite numbers) before any node is changed. */
static int l_worlds(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int has_locals = !lua_isnoneornil(L, 3);
    if (has_locals) luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_Unsigned un = lua_rawlen(L, 2);
    const size_t per = 16 * sizeof(double) + 2 * sizeof(size_t) + 1;
    if (un > (lua_Unsigned)((SIZE_MAX - 64) / per))
        return gerr(L, "limber.gltf: %s: too many nodes", name);
    size_t n = (size_t)un;
    /* one scratch block: matrices, parents (0 = none, else 1-based), stack, state */
    double *m = (double *)lua_newuserdatauv(L, n * per + 1, 0); /* 4 */
    size_t *parent = (size_t *)(m + 16 * n);
    size_t *stack = parent + n;
    unsigned char *state = (unsigned char *)(stack + n);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 2, (lua_Integer)i + 1) != LUA_TTABLE)
            return gerr(L, "limber.gltf: %s: nodes[%I] is not a node table", name,
                        (lua_Integer)i + 1);
        lua_pushliteral(L, "parent");
        int pt = lua_rawget(L, -2);
        int isnum = 0;
        lua_Integer p = lua_tointegerx(L, -1, &isnum);
        lua_pop(L, 1);
        if (pt == LUA_TNIL) {
            parent[i] = 0;
        } else if (pt != LUA_TNUMBER || !isnum || p < 1 || (lua_Unsigned)p > un ||
                   (size_t)p == i + 1) {
            return gerr(L, "limber.gltf: %s: nodes[%I].parent is not another node's index", name,
                        (lua_Integer)i + 1);
        } else {
            parent[i] = (size_t)p;
        }
        int ok;
        if (has_locals && lua_rawgeti(L, 3, (lua_Integer)i + 1) != LUA_TNIL) {
            ok = read_mat16(L, -1, m + 16 * i);
            lua_pop(L, 1);
            if (!ok)
                return gerr(L, "limber.gltf: %s: locals[%I] must be a table of 16 finite numbers",
                            name, (lua_Integer)i + 1);
        } else {
            if (has_locals) lua_pop(L, 1);
            lua_pushliteral(L, "local_matrix");
            lua_rawget(L, -2);
            ok = read_mat16(L, -1, m + 16 * i);
            lua_pop(L, 1);
            if (!ok)
                return gerr(L,
                            "limber.gltf: %s: nodes[%I].local_matrix must be a table of 16 finite "
                            "numbers",
                            name, (lua_Integer)i + 1);
        }
        lua_pop(L, 1);
        state[i] = 0;
    }
    /* state 0: local only, 1: on the stack, 2: world done */
    for (size_t i = 0; i < n; i++) {
        size_t top = 0, x = i;
        while (state[x] == 0) {
            state[x] = 1;
            stack[top++] = x;
            if (!parent[x]) break;
            x = parent[x] - 1;
        }
        if (state[x] == 1 && parent[x]) /* back on this walk's own path */
            return gerr(L, "limber.gltf: %s: nodes[%I] is its own ancestor", name,
                        (lua_Integer)x + 1);
        while (top > 0) {
            size_t j = stack[--top];
            if (parent[j]) {
                const double *a = m + 16 * (parent[j] - 1);
                double *b = m + 16 * j, o[16];
                for (int c = 0; c < 4; c++)
                    for (int r = 0; r < 4; r++) {
                        double s = 0;
                        for (int k = 0; k < 4; k++)
                            s = s + a[k * 4 + r] * b[c * 4 + k];
                        o[c * 4 + r] = s;
                    }
                memcpy(b, o, sizeof o);
            }
            state[j] = 2;
        }
    }
    /* all checked: build every world table, then store them */
    lua_settop(L, 4);
    lua_createtable(L, (int)(n < INT_MAX ? n : INT_MAX), 0); /* 5 */
    /* 6: the node tables as read, since a __gc run by the allocations below
     * may change the caller's list (the stores then go to these, all tables) */
    lua_createtable(L, (int)(n < INT_MAX ? n : INT_MAX), 0);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 2, (lua_Integer)i + 1) != LUA_TTABLE)
            return gerr(L, "limber.gltf: %s: nodes[%I] changed during the call", name,
                        (lua_Integer)i + 1);
        lua_rawseti(L, 6, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 16, 0);
        for (size_t k = 0; k < 16; k++) {
            lua_pushnumber(L, (lua_Number)m[16 * i + k]);
            lua_rawseti(L, -2, (lua_Integer)k + 1);
        }
        lua_rawseti(L, 5, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 6, (lua_Integer)i + 1);
        lua_pushliteral(L, "world");
        lua_rawgeti(L, 5, (lua_Integer)i + 1);
        lua_rawset(L, -3);
        lua_pop(L, 1);
    }
    return 0;
}

void lcore_open_gltf(lua_State *L) {
    static const luaL_Reg funcs[] = {{"gltf_glb", l_glb},
                                     {"gltf_base64", l_base64},
                                     {"gltf_accessor", l_accessor},
                                     {"gltf_influences", l_influences},
                                     {"gltf_stats", l_stats},
                                     {"gltf_read_file", l_read_file},
                                     {"gltf_read_model", l_read_model},
                                     {"gltf_worlds", l_worlds},
                                     {"gltf_mark_empty", l_mark_empty},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}
