/* lcompat.c: the parts of lcompat.h that are functions (see there). Empty
 * on Lua 5.4. */
#include "lcompat.h"

#include <stdio.h>
#include <string.h>

typedef int lcompat_nonempty; /* ISO C: a translation unit declares something */

#if LUA_VERSION_NUM < 503

lua_Integer lcompat_tointegerx(lua_State *L, int idx, int *isnum) {
    int ok = 0;
    lua_Integer v = 0;
    lua_Number n = lua_tonumberx(L, idx, &ok);
    ok = ok && lcompat_exact(n, &v);
    if (isnum) *isnum = ok;
    return ok ? v : 0;
}

int lcompat_isinteger(lua_State *L, int idx) {
    int ok;
    lcompat_tointeger_strict(L, idx, &ok);
    return ok;
}

lua_Integer lcompat_checkinteger(lua_State *L, int arg) {
    int ok = 0;
    lua_Integer v = lcompat_tointegerx(L, arg, &ok);
    if (!ok) {
        if (lua_isnumber(L, arg)) luaL_argerror(L, arg, "number has no integer representation");
        lcompat_typeerror(L, arg, "number");
    }
    return v;
}

lua_Integer lcompat_optinteger(lua_State *L, int arg, lua_Integer def) {
    return lua_isnoneornil(L, arg) ? def : lcompat_checkinteger(L, arg);
}

/* One formatted item, as lua_pushfstring of Lua 5.3 prints it. */
static void push_item(lua_State *L, char conv, va_list *ap) {
    char buf[64];
    switch (conv) {
    case 's': {
        const char *s = va_arg(*ap, const char *);
        lua_pushstring(L, s ? s : "(null)");
        return;
    }
    case 'd':
        snprintf(buf, sizeof buf, "%d", va_arg(*ap, int));
        break;
    case 'c':
        buf[0] = (char)va_arg(*ap, int), buf[1] = '\0';
        break;
    case 'I':
        snprintf(buf, sizeof buf, "%td", (ptrdiff_t)va_arg(*ap, lua_Integer));
        break;
    case 'p':
        snprintf(buf, sizeof buf, "%p", va_arg(*ap, void *));
        break;
    case '%':
        buf[0] = '%', buf[1] = '\0';
        break;
    case 'f': {
        int n = snprintf(buf, sizeof buf, "%.14g", (double)va_arg(*ap, lua_Number));
        /* "looks like an int": Lua 5.3 adds ".0" so the value reads as a float */
        if (n > 0 && (size_t)n + 2 < sizeof buf && buf[strspn(buf, "-0123456789")] == '\0')
            memcpy(buf + n, ".0", 3);
        break;
    }
    default:
        luaL_error(L, "invalid option '%%%c' to 'lua_pushfstring'", conv);
        return;
    }
    lua_pushstring(L, buf);
}

const char *lcompat_pushvfstring(lua_State *L, const char *fmt, va_list ap) {
    va_list cp;
    va_copy(cp, ap);
    lua_pushliteral(L, "");
    for (const char *p = fmt; *p;) {
        const char *pct = strchr(p, '%');
        size_t run = pct ? (size_t)(pct - p) : strlen(p);
        if (run > 0) {
            lua_pushlstring(L, p, run);
            lua_concat(L, 2);
        }
        if (!pct) break;
        if (pct[1] == '\0') break; /* a lone '%' at the end: dropped, as Lua does */
        push_item(L, pct[1], &cp);
        lua_concat(L, 2);
        p = pct + 2;
    }
    va_end(cp);
    return lua_tostring(L, -1);
}

const char *lcompat_pushfstring(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *s = lcompat_pushvfstring(L, fmt, ap);
    va_end(ap);
    return s;
}

int lcompat_error(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, 1);
    lcompat_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

#endif

#if LUA_VERSION_NUM < 504

/* Before 5.4 a userdata has one associated value (the 5.1 environment, the
 * 5.2 / 5.3 user value); a table there holds the numbered user values. */
void *lcompat_newuserdatauv(lua_State *L, size_t size, int nuv) {
    void *p = lua_newuserdata(L, size);
    if (nuv > 0) {
        lua_createtable(L, nuv, 0);
        lua_setuservalue(L, -2);
    }
    return p;
}

int lcompat_getiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    if (lua_getuservalue(L, idx) != LUA_TTABLE || n < 1) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNONE;
    }
    lua_rawgeti(L, -1, n);
    lua_remove(L, -2);
    return lua_type(L, -1);
}

int lcompat_setiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    if (lua_getuservalue(L, idx) != LUA_TTABLE || n < 1) {
        lua_pop(L, 2);
        return 0;
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, n);
    lua_pop(L, 1);
    return 1;
}

int lcompat_typeerror(lua_State *L, int arg, const char *tname) {
    const char *actual;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING)
        actual = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA)
        actual = "light userdata";
    else
        actual = luaL_typename(L, arg);
    return luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", tname, actual));
}

#if LUA_VERSION_NUM < 503
void *lcompat_checkudata(lua_State *L, int arg, const char *tname) {
    void *p = luaL_testudata(L, arg, tname);
    if (!p) lcompat_typeerror(L, arg, tname);
    return p;
}
#endif

#endif
