/* lcore.c: the limber.core module entry point, shared binding helpers and
 * the Buffer type. */
#include "lcore.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---------------------------------------------------------- */

uint32_t lcore_check_index(lua_State *L, int arg, uint32_t n, const char *what) {
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || i > (lua_Integer)n)
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "%s index %I out of range [1, %I]", what, (lua_Integer)i,
                                      (lua_Integer)n));
    return (uint32_t)(i - 1);
}

int lcore_float_ok(lua_Number v) {
    return isfinite(v) && fabs(v) <= (lua_Number)LMB_FLOAT_LIMIT;
}

float lcore_check_float(lua_State *L, int arg, const char *what) {
    lua_Number v = luaL_checknumber(L, arg);
    if (!lcore_float_ok(v))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s is not a finite float (%f)", what, v));
    return (float)v;
}

/* Raises a problem with the value read from argument `arg`: as "bad
 * argument #arg to 'name' (msg)" (luaL_argerror names the function being
 * called) when arg is an argument position, else as plain msg (its `what`
 * names the caller). */
static int read_error(lua_State *L, int arg, const char *msg) {
    if (arg > 0) return luaL_argerror(L, arg, msg);
    return luaL_error(L, "%s", msg);
}

void lcore_read_floats(lua_State *L, int arg, const char *what, lua_Integer first, float *out,
                       size_t n) {
    if (arg > 0)
        luaL_checktype(L, arg, LUA_TTABLE);
    else if (lua_type(L, arg) != LUA_TTABLE)
        luaL_error(L, "%s must be a table (got %s)", what, luaL_typename(L, arg));
    int argpos = arg > 0 ? arg : 0; /* a relative index is not an argument position */
    arg = lua_absindex(L, arg);
    /* raw reads: a metamethod could answer differently each time or run
     * code in the middle of the copy; the caller then uses only `out` */
    if (first < 1 || (lua_Integer)n > LUA_MAXINTEGER - first)
        luaL_error(L, "%s: index range out of bounds", what);
    for (size_t k = 0; k < n; k++) {
        lua_Integer idx = first + (lua_Integer)k;
        int t = lua_rawgeti(L, arg, idx);
        if (t != LUA_TNUMBER)
            read_error(L, argpos,
                       lua_pushfstring(L, "%s[%I] must be a number (got %s)", what, idx,
                                       luaL_typename(L, -1)));
        lua_Number v = lua_tonumber(L, -1);
        if (!lcore_float_ok(v))
            read_error(L, argpos,
                       lua_pushfstring(L, "%s[%I] is not a finite float (%f)", what, idx, v));
        out[k] = (float)v;
        lua_pop(L, 1);
    }
}

void lcore_push_floats(lua_State *L, const float *v, int n, int out_arg) {
    if (out_arg > 0 && !lua_isnoneornil(L, out_arg)) {
        luaL_checktype(L, out_arg, LUA_TTABLE);
        lua_pushvalue(L, out_arg);
    } else {
        lua_createtable(L, n, 0);
    }
    for (int k = 0; k < n; k++) {
        lua_pushnumber(L, (lua_Number)v[k]);
        lua_rawseti(L, -2, k + 1);
    }
}

int lcore_raise(lua_State *L, const lmb_error *e, const char *where) {
    char msg[320];
    lmb_error_format(e, msg, sizeof msg);
    return luaL_error(L, "%s: %s", where, msg);
}

int lcore_raise_arg(lua_State *L, int arg, const lmb_error *e) {
    char msg[320];
    lmb_error_format(e, msg, sizeof msg);
    return luaL_argerror(L, arg, msg);
}

void *lcore_newobject(lua_State *L, size_t bytes, int nuv, const char *mt) {
    if (bytes > ((size_t)1 << 40))
        luaL_error(L, "limber: object of %I bytes is too large", (lua_Integer)bytes);
    void *raw = lua_newuserdatauv(L, bytes + 64, nuv);
    memset(raw, 0, bytes + 64);
    luaL_setmetatable(L, mt);
    return lmb_align_ptr(raw, 64);
}

void lcore_class(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods) {
    luaL_newmetatable(L, name);
    if (meta) luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

int lcore_status_error(lua_State *L, lmb_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *where = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return luaL_error(L, "%s: %s", where, lmb_strerror(st));
}

/* ---- buffers ---------------------------------------------------------- */

static const char *const type_names[] = {"f32", "u8", "u16", "u32", NULL};

size_t lbuf_scalar_size(int type) {
    switch (type) {
    case LBUF_U8:
        return 1;
    case LBUF_U16:
        return 2;
    default:
        return 4;
    }
}

lbuffer *lbuf_push(lua_State *L, int type, uint32_t width, size_t count) {
    size_t ss = lbuf_scalar_size(type);
    if (width == 0 || count > ((size_t)1 << 40) / ss / width)
        luaL_error(L, "limber: buffer of %I x %I is too large", (lua_Integer)count,
                   (lua_Integer)width);
    size_t bytes = count * width * ss;
    lbuffer *b = (lbuffer *)lua_newuserdatauv(L, sizeof(lbuffer) + 64 + bytes, 1);
    b->data = lmb_align_ptr(b + 1, 64);
    memset(b->data, 0, bytes);
    b->count = count;
    b->width = width;
    b->type = (uint8_t)type;
    b->readonly = 0;
    luaL_setmetatable(L, BUFFER_MT);
    return b;
}

lbuffer *lbuf_push_view(lua_State *L, int owner, void *data, int type, uint32_t width, size_t count,
                        int readonly) {
    owner = lua_absindex(L, owner);
    lbuffer *b = (lbuffer *)lua_newuserdatauv(L, sizeof(lbuffer), 1);
    b->data = data;
    b->count = count;
    b->width = width;
    b->type = (uint8_t)type;
    b->readonly = (uint8_t)(readonly != 0);
    lua_pushvalue(L, owner);
    lua_setiuservalue(L, -2, 1); /* the view reads the owner's memory: keep it alive */
    luaL_setmetatable(L, BUFFER_MT);
    return b;
}

lbuffer *lbuf_check(lua_State *L, int arg) {
    return (lbuffer *)luaL_checkudata(L, arg, BUFFER_MT);
}

static lua_Number buf_scalar(const lbuffer *b, size_t k) {
    switch (b->type) {
    case LBUF_U8:
        return ((const uint8_t *)b->data)[k];
    case LBUF_U16:
        return ((const uint16_t *)b->data)[k];
    case LBUF_U32:
        return ((const uint32_t *)b->data)[k];
    default:
        return (lua_Number)((const float *)b->data)[k];
    }
}

static void push_element(lua_State *L, const lbuffer *b, size_t i) {
    size_t base = i * b->width;
    if (b->width == 1) {
        if (b->type == LBUF_F32)
            lua_pushnumber(L, buf_scalar(b, base));
        else
            lua_pushinteger(L, (lua_Integer)buf_scalar(b, base));
        return;
    }
    lua_createtable(L, (int)b->width, 0);
    for (uint32_t c = 0; c < b->width; c++) {
        if (b->type == LBUF_F32)
            lua_pushnumber(L, buf_scalar(b, base + c));
        else
            lua_pushinteger(L, (lua_Integer)buf_scalar(b, base + c));
        lua_rawseti(L, -2, c + 1);
    }
}

/** buf:get(i): element i (a number, or a table of `width` numbers). */
static int l_buf_get(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    uint32_t n = b->count > UINT32_MAX ? UINT32_MAX : (uint32_t)b->count;
    uint32_t i = lcore_check_index(L, 2, n, "element");
    push_element(L, b, i);
    return 1;
}

static lua_Number type_max(int type) {
    return type == LBUF_U8 ? 255.0 : type == LBUF_U16 ? 65535.0 : 4294967295.0;
}

/* True when v can be stored in an element of b's type. */
static int scalar_ok(const lbuffer *b, lua_Number v) {
    if (b->type == LBUF_F32) return lcore_float_ok(v);
    return v >= 0 && v <= type_max(b->type) && floor(v) == v;
}

static void scalar_put(lbuffer *b, size_t k, lua_Number v) {
    switch (b->type) {
    case LBUF_U8:
        ((uint8_t *)b->data)[k] = (uint8_t)v;
        break;
    case LBUF_U16:
        ((uint16_t *)b->data)[k] = (uint16_t)v;
        break;
    case LBUF_U32:
        ((uint32_t *)b->data)[k] = (uint32_t)v;
        break;
    default:
        ((float *)b->data)[k] = (float)v;
        break;
    }
}

static int bad_scalar(lua_State *L, const lbuffer *b, int arg, lua_Integer pos, lua_Number v) {
    if (b->type == LBUF_F32)
        return luaL_argerror(L, arg,
                             lua_pushfstring(L, "value %I (%f) is not a finite float", pos, v));
    return luaL_argerror(L, arg,
                         lua_pushfstring(L, "value %I (%f) is not an integer in [0, %I]", pos, v,
                                         (lua_Integer)type_max(b->type)));
}

/** buf:set(i, v) with v a number (width 1) or a table of `width` numbers.
 * Every value is checked before anything is written. */
static int l_buf_set(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    if (b->readonly)
        return luaL_error(L, "limber.Buffer: this buffer is read-only (a view of derived data)");
    uint32_t n = b->count > UINT32_MAX ? UINT32_MAX : (uint32_t)b->count;
    uint32_t i = lcore_check_index(L, 2, n, "element");
    size_t base = (size_t)i * b->width;
    lua_Number vals[64];
    if (b->width == 1 && lua_type(L, 3) == LUA_TNUMBER) {
        vals[0] = lua_tonumber(L, 3);
    } else {
        luaL_checktype(L, 3, LUA_TTABLE);
        for (uint32_t c = 0; c < b->width; c++) {
            int isnum;
            lua_rawgeti(L, 3, c + 1);
            vals[c] = lua_tonumberx(L, -1, &isnum);
            lua_pop(L, 1);
            if (!isnum)
                return luaL_argerror(L, 3,
                                     lua_pushfstring(L, "value %d is not a number", (int)c + 1));
        }
    }
    for (uint32_t c = 0; c < b->width; c++)
        if (!scalar_ok(b, vals[c])) return bad_scalar(L, b, 3, c + 1, vals[c]);
    for (uint32_t c = 0; c < b->width; c++)
        scalar_put(b, base + c, vals[c]);
    return 0;
}

/* Reads optional (first, count) in elements; returns a byte range. Every
 * bound is checked before any arithmetic on the Lua integers (any value of
 * the 64-bit range gives an error, never an overflow). */
static void elem_range(lua_State *L, lbuffer *b, int arg, size_t *off, size_t *len) {
    lua_Integer n = (lua_Integer)b->count; /* at most 2^40 */
    lua_Integer first = luaL_optinteger(L, arg, 1);
    if (first < 1 || first > n + 1)
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "first element %I out of range [1, %I]", first, n + 1));
    lua_Integer rest = n - first + 1; /* in [0, n] */
    lua_Integer count = luaL_optinteger(L, arg + 1, rest);
    if (count < 0 || count > rest)
        luaL_argerror(L, arg + 1, lua_pushfstring(L, "count %I out of range [0, %I]", count, rest));
    size_t es = b->width * lbuf_scalar_size(b->type);
    *off = (size_t)(first - 1) * es;
    *len = (size_t)count * es;
}

/** buf:bytes([first, count]): a Lua string copy of elements first .. first+count-1. */
static int l_buf_bytes(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    size_t off, len;
    elem_range(L, b, 2, &off, &len);
    lua_pushlstring(L, (const char *)b->data + off, len);
    return 1;
}

/** buf:set_bytes(s [, first]): copies a string's bytes into the buffer. */
static int l_buf_set_bytes(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    lua_Integer first = luaL_optinteger(L, 3, 1);
    size_t es = b->width * lbuf_scalar_size(b->type);
    if (b->readonly)
        return luaL_error(L, "limber.Buffer: this buffer is read-only (a view of derived data)");
    if (first < 1 || first > (lua_Integer)b->count + 1)
        return luaL_argerror(L, 3,
                             lua_pushfstring(L, "first element %I out of range [1, %I]", first,
                                             (lua_Integer)b->count + 1));
    if (len % es != 0)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L,
                                             "%I bytes is not a whole number of %I-byte elements",
                                             (lua_Integer)len, (lua_Integer)es));
    if (len / es > b->count - (size_t)(first - 1))
        return luaL_argerror(L, 2, "string is longer than the buffer");
    if (b->type == LBUF_F32) {
        for (size_t k = 0; k < len / 4; k++) {
            float v;
            memcpy(&v, s + k * 4, 4);
            if (!isfinite(v))
                return luaL_argerror(
                    L, 2, lua_pushfstring(L, "float %I is NaN or infinite", (lua_Integer)k + 1));
        }
    }
    memcpy((char *)b->data + (size_t)(first - 1) * es, s, len);
    return 0;
}

/** buf:ptr(): a borrowed lightuserdata to the first byte and the size in
 * bytes, for other C modules; valid while the buffer (or its owner) lives. */
static int l_buf_ptr(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    lua_pushlightuserdata(L, b->data);
    lua_pushinteger(L, (lua_Integer)(b->count * b->width * lbuf_scalar_size(b->type)));
    return 2;
}

static int l_buf_len(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)lbuf_check(L, 1)->count);
    return 1;
}

/** buf:element_count() (also #buf), buf:width() (scalars per element),
 * buf:scalar_type() ("f32", "u8", "u16" or "u32"). */
static int l_buf_width(lua_State *L) {
    lua_pushinteger(L, lbuf_check(L, 1)->width);
    return 1;
}

static int l_buf_scalar_type(lua_State *L) {
    lua_pushstring(L, type_names[lbuf_check(L, 1)->type]);
    return 1;
}

static int l_buf_index(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    if (lua_type(L, 2) == LUA_TNUMBER) {
        lua_Integer i = luaL_checkinteger(L, 2);
        if (i < 1 || i > (lua_Integer)b->count) return 0;
        push_element(L, b, (size_t)(i - 1));
        return 1;
    }
    luaL_getmetafield(L, 1, "methods");
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

static int l_buf_tostring(lua_State *L) {
    lbuffer *b = lbuf_check(L, 1);
    lua_pushfstring(L, "limber.Buffer(%s x%d, %I elements)", type_names[b->type], (int)b->width,
                    (lua_Integer)b->count);
    return 1;
}

/** core.buffer(type, width, count_or_values): a new owning buffer. With a
 * table, its length must be a multiple of width and gives the contents. */
static int l_buffer_new(lua_State *L) {
    int type = luaL_checkoption(L, 1, NULL, type_names);
    lua_Integer width = luaL_checkinteger(L, 2);
    luaL_argcheck(L, width >= 1 && width <= 64, 2, "width must be in [1, 64]");
    if (lua_type(L, 3) == LUA_TTABLE) {
        lua_Integer n = lcore_rawlen(L, 3);
        if (n < 0) return luaL_argerror(L, 3, "negative length");
        if (n % width != 0)
            return luaL_argerror(
                L, 3, lua_pushfstring(L, "%I values is not a multiple of width %I", n, width));
        lbuffer *b = lbuf_push(L, type, (uint32_t)width, (size_t)(n / width));
        for (lua_Integer k = 0; k < n; k++) {
            int isnum;
            lua_rawgeti(L, 3, k + 1);
            lua_Number v = lua_tonumberx(L, -1, &isnum);
            lua_pop(L, 1);
            if (!isnum)
                return luaL_argerror(L, 3, lua_pushfstring(L, "value %I is not a number", k + 1));
            if (!scalar_ok(b, v)) return bad_scalar(L, b, 3, k + 1, v);
            scalar_put(b, (size_t)k, v);
        }
        return 1;
    }
    lua_Integer count = luaL_checkinteger(L, 3);
    luaL_argcheck(L, count >= 0 && count <= ((lua_Integer)1 << 32), 3, "count out of range");
    lbuf_push(L, type, (uint32_t)width, (size_t)count);
    return 1;
}

void lcore_open_buffer(lua_State *L) {
    static const luaL_Reg methods[] = {{"get", l_buf_get},
                                       {"set", l_buf_set},
                                       {"bytes", l_buf_bytes},
                                       {"set_bytes", l_buf_set_bytes},
                                       {"ptr", l_buf_ptr},
                                       {"element_count", l_buf_len},
                                       {"width", l_buf_width},
                                       {"scalar_type", l_buf_scalar_type},
                                       {NULL, NULL}};
    luaL_newmetatable(L, BUFFER_MT);
    lua_pushcfunction(L, l_buf_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_buf_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, l_buf_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_buffer_new);
    lua_setfield(L, -2, "buffer");
}

/* ---- module ----------------------------------------------------------- */

static const char *const simd_names[] = {"portable", "avx2", "avx512", NULL};

/* Settings of one lua_State (a userdata in the registry): nothing the
 * module does in one state changes another. */
typedef struct lcore_state {
    int simd_cap; /* LMB_SIMD_*: the level the kernels may use (the CPU may allow less) */
} lcore_state;

#define STATE_KEY "limber.state"

static lcore_state *get_state(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, STATE_KEY);
    lcore_state *st = (lcore_state *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!st) luaL_error(L, "limber.core: the module is not open in this state");
    return st;
}

int lcore_simd_cap(lua_State *L) {
    return get_state(L)->simd_cap;
}

void lcore_simd_enter(lua_State *L) {
    lmb_simd_use(get_state(L)->simd_cap);
}

/* Every function of the module runs through an entry: upvalue 1 is the
 * function, upvalue 2 the state's settings. The kernel level is a per
 * thread value (limber.h); setting it from the state on each call keeps two
 * states apart, whether they run on two threads or take turns on one.
 * Metamethods (buffer indexing, __len, __tostring) run through `entry`. */
static int entry(lua_State *L) {
    const lcore_state *st = (const lcore_state *)lua_touserdata(L, lua_upvalueindex(2));
    lmb_simd_use(st->simd_cap);
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/* The error of a named entry's function, renamed: `q` is the public name
 * ("limber.Pose:set_trs", "limber.core.clip"). Lua's argument errors name
 * a function as the call site spelt it ("bad argument #2 to 'set_trs'"),
 * and the binding's own messages start with a "limber...: " prefix of
 * their own; both become the public name. The position is the caller's. */
static int raise_named(lua_State *L, const char *q) {
    const char *msg = lua_tostring(L, -1);
    /* a memory error, or an error that is not a string, passes unchanged */
    if (lua_type(L, -1) != LUA_TSTRING || strcmp(msg, "not enough memory") == 0)
        return lua_error(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_where(L, 1);
    luaL_addvalue(&b);
    const char *rest;
    char *end;
    long k = strncmp(msg, "bad argument #", 14) == 0 ? strtol(msg + 14, &end, 10) : 0;
    if (k > 0 && strncmp(end, " to '", 5) == 0 && (rest = strchr(end + 5, '\'')) != NULL) {
        /* inside the protected call the function never runs as a method:
         * count the arguments as the caller wrote them, as Lua does */
        lua_Debug ar;
        if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.namewhat &&
            strcmp(ar.namewhat, "method") == 0)
            k--;
        if (k == 0) {
            luaL_addstring(&b, "calling '");
            luaL_addstring(&b, q);
            luaL_addstring(&b, "' on bad self");
            luaL_addstring(&b, rest + 1);
        } else {
            lua_pushfstring(L, "bad argument #%d to '%s'", (int)k, q);
            luaL_addvalue(&b);
            luaL_addstring(&b, rest + 1);
        }
    } else if (strncmp(msg, "calling '", 9) == 0 && (rest = strchr(msg + 9, '\'')) != NULL) {
        luaL_addstring(&b, "calling '");
        luaL_addstring(&b, q);
        luaL_addstring(&b, rest);
    } else {
        size_t ql = strlen(q);
        if (strncmp(msg, q, ql) == 0 && msg[ql] == ':') {
            luaL_addstring(&b, msg); /* already named */
        } else {
            /* "limber.<anything>: problem" -> "<q>: problem" */
            rest = msg;
            if (strncmp(msg, "limber.", 7) == 0) {
                const char *colon = strstr(msg, ": ");
                const char *space = strchr(msg, ' ');
                if (colon && (!space || colon < space)) rest = colon + 2;
            }
            luaL_addstring(&b, q);
            luaL_addstring(&b, ": ");
            luaL_addstring(&b, rest);
        }
    }
    luaL_pushresult(&b);
    return lua_error(L);
}

/* The entry of every other function and method: as `entry`, and an error
 * it raises names the public name in upvalue 3 (raise_named). The call is
 * protected for that; it costs tens of nanoseconds, against microseconds
 * of work for the batch calls the API is made of. */
static int entry_named(lua_State *L) {
    const lcore_state *st = (const lcore_state *)lua_touserdata(L, lua_upvalueindex(2));
    lmb_simd_use(st->simd_cap);
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    if (lua_pcall(L, n, LUA_MULTRET, 0) != LUA_OK)
        return raise_named(L, lua_tostring(L, lua_upvalueindex(3)));
    return lua_gettop(L);
}

static int has_upvalue(lua_State *L, int f) {
    if (lua_getupvalue(L, f, 1) == NULL) return 0;
    lua_pop(L, 1);
    return 1;
}

/* Wraps the C functions without upvalues of the table at `t` (and of the
 * tables it holds, one level: __index, methods): metamethods (keys "__*")
 * and the glTF helpers (keys "gltf_*") in entry, every other function in
 * entry_named with the public name `prefix` .. key. */
static void wrap_table(lua_State *L, int t, int state, int depth, const char *prefix) {
    t = lua_absindex(L, t);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        /* metamethods, and the glTF helpers whose errors name the loader
         * function that called them (limber.gltf's content errors), keep
         * their messages */
        int named = lua_type(L, -2) == LUA_TSTRING && strncmp(lua_tostring(L, -2), "__", 2) != 0 &&
                    strncmp(lua_tostring(L, -2), "gltf_", 5) != 0;
        if (lua_type(L, -1) == LUA_TTABLE && depth > 0 && lua_type(L, -2) == LUA_TSTRING) {
            wrap_table(L, -1, state, depth - 1, prefix);
        } else if (lua_iscfunction(L, -1) && lua_tocfunction(L, -1) != entry &&
                   lua_tocfunction(L, -1) != entry_named && !has_upvalue(L, -1)) {
            lua_pushvalue(L, -2); /* key */
            lua_pushcfunction(L, lua_tocfunction(L, -2));
            lua_pushvalue(L, state);
            if (named) {
                lua_pushfstring(L, "%s%s", prefix, lua_tostring(L, -3));
                lua_pushcclosure(L, entry_named, 3);
            } else {
                lua_pushcclosure(L, entry, 2);
            }
            lua_rawset(L, t); /* an existing key: allowed while traversing */
        }
        lua_pop(L, 1);
    }
}

/* Classes left unwrapped: their methods are called per node (scene reads
 * and writes), never run a kernel that dispatches on the SIMD level, and
 * name themselves in their errors. */
static int plain_class(const char *name) {
    static const char *const plain[] = {"limber.Scene", NULL};
    for (int k = 0; plain[k]; k++)
        if (strcmp(name, plain[k]) == 0) return 1;
    return 0;
}

/* Wraps the module table (top of the stack, functions named
 * "limber.core.<name>") and every "limber.*" table of the registry (the
 * metatables, methods named "limber.<Class>:<name>"). */
static void wrap_module(lua_State *L, int state) {
    wrap_table(L, -1, state, 1, "limber.core.");
    lua_pushnil(L);
    while (lua_next(L, LUA_REGISTRYINDEX)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE &&
            strncmp(lua_tostring(L, -2), "limber.", 7) == 0 && !plain_class(lua_tostring(L, -2))) {
            const char *prefix = lua_pushfstring(L, "%s:", lua_tostring(L, -2));
            wrap_table(L, -2, state, 1, prefix);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
}

/** core.simd([setting]): reports (and with an argument sets) which kernels
 * are used in this lua_State (other states keep their own setting).
 * setting: true (the default: the level that runs fastest on this CPU,
 * which is the best it allows except on CPUs that execute AVX-512 in two
 * 256-bit halves, AMD's Zen 4, where it is "avx2"), false (portable C
 * only), or a level name "portable", "avx2", "avx512" (a cap: the CPU may
 * allow less). Returns whether SIMD kernels are in use, whether the CPU has
 * AVX2 + FMA, the level in use, the best level of the CPU and the level the
 * default stands for on this CPU. */
static int l_simd(lua_State *L) {
    lcore_state *st = get_state(L);
    int t = lua_type(L, 1);
    if (t == LUA_TSTRING)
        st->simd_cap = luaL_checkoption(L, 1, NULL, simd_names);
    else if (t == LUA_TBOOLEAN)
        st->simd_cap = lua_toboolean(L, 1) ? LMB_SIMD_DEFAULT : LMB_SIMD_PORTABLE;
    else if (t != LUA_TNONE && t != LUA_TNIL)
        return luaL_typeerror(L, 1, "boolean or level name");
    lmb_simd_use(st->simd_cap);
    lua_pushboolean(L, lmb_simd_active());
    lua_pushboolean(L, lmb_cpu_has_avx2());
    lua_pushstring(L, simd_names[lmb_simd_level()]);
    lua_pushstring(L, simd_names[lmb_simd_cpu_level()]);
    lua_pushstring(L, simd_names[lmb_simd_cpu_default()]);
    return 5;
}

/** core.clock(): a monotonic clock in seconds (for benchmarks and frame timing). */
static int l_clock(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

LIMBER_EXPORT int luaopen_limber_core(lua_State *L);

LIMBER_EXPORT int luaopen_limber_core(lua_State *L) {
    /* detect the CPU's SIMD level now (once per process, thread-safe) */
    (void)lmb_simd_cpu_level();
    luaL_checkversion(L);
    /* this state's settings, kept if the module is opened again */
    if (lua_getfield(L, LUA_REGISTRYINDEX, STATE_KEY) != LUA_TUSERDATA) {
        lua_pop(L, 1);
        lcore_state *st = (lcore_state *)lua_newuserdatauv(L, sizeof(lcore_state), 0);
        st->simd_cap = LMB_SIMD_DEFAULT;
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, STATE_KEY);
    }
    int state = lua_gettop(L);
    lmb_simd_use(((lcore_state *)lua_touserdata(L, state))->simd_cap);
    lua_newtable(L);
    lcore_open_buffer(L);
    lcore_open_pose(L);
    lcore_open_gltf(L);
    lcore_open_clip(L);
    lcore_open_plan(L);
    lcore_open_skinning(L);
    lcore_open_scene(L);
    lcore_open_snapshot(L);
    lcore_open_ik(L);
    lcore_open_machine(L);
    lua_pushcfunction(L, l_simd);
    lua_setfield(L, -2, "simd");
    lua_pushcfunction(L, l_clock);
    lua_setfield(L, -2, "clock");
    lua_pushliteral(L, LIMBER_VERSION);
    lua_setfield(L, -2, "_VERSION");
    lua_pushinteger(L, LMB_MAX_JOINTS);
    lua_setfield(L, -2, "MAX_JOINTS");
    wrap_module(L, state);
    return 1;
}
