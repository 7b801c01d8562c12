/* oom_host.c: out-of-memory injection for limber (run by spec/oom_spec.lua).
 *
 *   oom_host SCRIPT count
 *   oom_host SCRIPT run FIRST LAST STRIDE REFERENCE
 *
 * SCRIPT is a Lua chunk that defines three global functions: SETUP()
 * (requires the modules; run with allocation failures off), WORK() (the
 * workload, resumable: each step keeps what it made in globals and is
 * skipped when already done) and VERIFY() (checks the state and returns a
 * checksum string of a fixed frame).
 *
 * count: runs SETUP, WORK counting the allocations WORK makes, WORK again,
 * and prints "allocations <n>" and "checksum <VERIFY()>".
 *
 * run: for N = FIRST, FIRST + STRIDE, ... <= LAST, in a fresh lua_State:
 * SETUP, then WORK with an allocator that refuses every allocation from
 * the N-th one on (counting from the start of WORK; a realloc that does not
 * grow a block never fails, as Lua requires), then, with failures off, WORK
 * again on the same state and VERIFY, whose checksum must be REFERENCE.
 * The failing WORK must end with an error whose message contains "not
 * enough memory" (or finish, when N is past its allocations). Each run is
 * a child process forked after SETUP; a signal (a crash, a sanitizer abort)
 * counts as bad. Prints one line per bad run, then "tried T, bad B", and
 * exits 1 when B > 0. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifndef LUA_OK
#define LUA_OK 0 /* Lua 5.1 */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static struct {
    int counting; /* count allocations (and fail from fail_at on) */
    long count;   /* allocations since counting started */
    long fail_at; /* 0: never fail */
} A;

static void *host_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    /* for ptr == NULL, osize is a type tag, not a size */
    int grows = ptr == NULL || nsize > osize;
    if (A.counting && grows) {
        A.count++;
        if (A.fail_at > 0 && A.count >= A.fail_at) return NULL;
    }
    return realloc(ptr, nsize);
}

/* Calls global function `name`; returns the status and leaves the result
 * or the error value on the stack. */
static int call(lua_State *L, const char *name) {
    lua_getglobal(L, name);
    return lua_pcall(L, 0, 1, 0);
}

static const char *value_text(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) return lua_tostring(L, idx);
    return luaL_typename(L, idx);
}

static lua_State *open_state(const char *script) {
    A.counting = 0;
    lua_State *L = lua_newstate(host_alloc, NULL);
    if (!L) {
        fprintf(stderr, "cannot create a state\n");
        exit(2);
    }
    luaL_openlibs(L);
    if (luaL_dofile(L, script) != LUA_OK || call(L, "SETUP") != LUA_OK) {
        fprintf(stderr, "setup failed: %s\n", value_text(L, -1));
        exit(2);
    }
    lua_settop(L, 0);
    return L;
}

static int count_mode(const char *script) {
    lua_State *L = open_state(script);
    A.counting = 1;
    A.count = 0;
    A.fail_at = 0;
    int st = call(L, "WORK");
    A.counting = 0;
    if (st != LUA_OK) {
        fprintf(stderr, "WORK failed without injection: %s\n", value_text(L, -1));
        return 2;
    }
    long n = A.count;
    lua_settop(L, 0);
    if (call(L, "WORK") != LUA_OK || (lua_settop(L, 0), call(L, "VERIFY")) != LUA_OK) {
        fprintf(stderr, "resume failed without injection: %s\n", value_text(L, -1));
        return 2;
    }
    printf("allocations %ld\nchecksum %s\n", n, value_text(L, -1));
    lua_close(L);
    return 0;
}

/* One injection run in a child process (forked from the parent's state
 * after SETUP, so every run starts from the same memory without paying
 * for SETUP again); a crash or sanitizer abort is reported by the parent.
 * Exit status 0: clean; 1: bad (details printed). */
static int one_run(lua_State *L, long n, const char *ref) {
    int bad = 0;
    A.counting = 1;
    A.count = 0;
    A.fail_at = n;
    int st = call(L, "WORK");
    A.counting = 0;
    A.fail_at = 0;
    /* LUA_OK: N is past the workload's allocations */
    if (st != LUA_OK && (lua_type(L, -1) != LUA_TSTRING ||
                         strstr(lua_tostring(L, -1), "not enough memory") == NULL)) {
        bad = 1;
        printf("N=%ld: WORK raised something else than out of memory: %s\n", n, value_text(L, -1));
    }
    lua_settop(L, 0);
    if (call(L, "WORK") != LUA_OK) {
        bad = 1;
        printf("N=%ld: the rest of the workload failed on the surviving state: %s\n", n,
               value_text(L, -1));
    } else if ((lua_settop(L, 0), call(L, "VERIFY")) != LUA_OK) {
        bad = 1;
        printf("N=%ld: VERIFY failed on the surviving state: %s\n", n, value_text(L, -1));
    } else if (strcmp(value_text(L, -1), ref) != 0) {
        bad = 1;
        printf("N=%ld: checksum %s, expected %s\n", n, value_text(L, -1), ref);
    }
    lua_close(L);
    fflush(stdout);
    return bad;
}

static int run_mode(const char *script, long first, long last, long stride, const char *ref) {
    long tried = 0, bad = 0;
    lua_State *L = open_state(script);
    fflush(stdout);
    for (long n = first; n <= last; n += stride) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) _exit(one_run(L, n, ref));
        int status = 0;
        if (waitpid(pid, &status, 0) < 0) {
            perror("waitpid");
            return 2;
        }
        tried++;
        if (WIFSIGNALED(status)) {
            bad++;
            printf("N=%ld: killed by signal %d\n", n, WTERMSIG(status));
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
            printf("N=%ld: exit status %d\n", n, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        fflush(stdout);
    }
    lua_close(L);
    printf("tried %ld, bad %ld\n", tried, bad);
    return bad > 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[2], "count") == 0) return count_mode(argv[1]);
    if (argc == 7 && strcmp(argv[2], "run") == 0) {
        long first = atol(argv[3]), last = atol(argv[4]), stride = atol(argv[5]);
        if (first < 1 || stride < 1) {
            fprintf(stderr, "FIRST and STRIDE must be >= 1\n");
            return 2;
        }
        return run_mode(argv[1], first, last, stride, argv[6]);
    }
    fprintf(stderr, "usage: oom_host SCRIPT count | oom_host SCRIPT run FIRST LAST STRIDE REF\n");
    return 2;
}
