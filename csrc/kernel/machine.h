/* machine.h: state machines and blend spaces stepped for a whole crowd in
 * one pass over a frame plan (plan.h), after its run.
 *
 * A machine definition (lmb_mdef) is flat and immutable: states, each with
 * its transitions in firing order (priority, then declaration order; an
 * "any" transition is listed under every state it can leave), each
 * transition with its conditions on numbered parameters. A blend space
 * (lmb_space) holds its points (1D: sorted positions; 2D: positions, a
 * triangulation and the hull edges, both made by the caller) and its
 * clips' durations (sync: every clip plays at the rate that makes it last
 * as long as the weighted mean duration).
 *
 * The crowd state (lmb_machines): per instance, parameter values (number or
 * boolean, or unset) by number; per instance and layer (a run, key =
 * i * layers + n), the machine running there with its state and the
 * source its clip plays on, a dirty flag (a parameter changed or a state
 * was entered), and the blend space playing on the layer with its sources
 * and the parameter value it was last put at.
 *
 * A step (lmb_machines_step) looks at the runs that are dirty or whose
 * state has a transition on the clip's time: a space state's space follows
 * its parameters (lmb_machines_apply, at once in C, or reported when the
 * caller syncs that space by markers); then the first transition whose
 * conditions hold is reported (at most one per run; one that also waits for
 * a marker is reported as a candidate: the caller checks the marker and the
 * rest of the list). The caller enters states: that is where clips start.
 *
 * Before a step changes an instance's sources it keeps what the run played
 * (lmb_machines_keep: clip, time, rate, loop, weight, time before, layer
 * weights), so events and root motion read after the step see the run. */
#ifndef LIMBER_MACHINE_H
#define LIMBER_MACHINE_H
#include "plan.h"

enum { LMB_OP_LT = 0, LMB_OP_LE, LMB_OP_GT, LMB_OP_GE, LMB_OP_EQ, LMB_OP_NE };
enum { LMB_PARAM_UNSET = 0, LMB_PARAM_NUMBER = 1, LMB_PARAM_BOOL = 2 };

/* The most sources a blend space has (a plan layer's most). */
#define LMB_SPACE_MAX 16

typedef struct lmb_mcond {
    uint32_t param;  /* parameter number */
    uint8_t op;      /* LMB_OP_* */
    uint8_t boolean; /* the value is a boolean (0 / 1 in value) */
    double value;
} lmb_mcond;

typedef struct lmb_mtrans {
    uint32_t cond_first, cond_count; /* into lmb_mdef.conds */
    int32_t trigger;                 /* parameter number, or -1 */
    uint8_t at_end, at_marker, has_phase;
    double phase; /* at_phase in [0, 1] */
} lmb_mtrans;

typedef struct lmb_mstate {
    uint32_t tr_first, tr_count; /* into lmb_mdef.trans, in firing order */
    uint8_t space;               /* a space state (its parameters in param) */
    uint8_t timed;               /* a transition waits on the clip's time */
    uint8_t dims;                /* a space state: 1 or 2 parameters */
    uint32_t param[2];
    float smooth; /* a space state: seconds its weights take to follow */
} lmb_mstate;

typedef struct lmb_mdef {
    uint32_t state_count, trans_count, cond_count;
    lmb_mstate *states;
    lmb_mtrans *trans;
    lmb_mcond *conds;
} lmb_mdef;

typedef struct lmb_space {
    uint32_t dims;  /* 1 or 2 */
    uint32_t count; /* points, 1 .. LMB_SPACE_MAX */
    uint32_t sync;  /* clips play at a common normalised phase */
    double *at;     /* count * dims: positions (1D: ascending, distinct) */
    double *dur;    /* count: clip durations (>= 0) */
    uint32_t tri_count, edge_count;
    uint32_t *tris;  /* tri_count * 3 point indices */
    uint32_t *edges; /* edge_count * 2 point indices: the hull */
} lmb_space;

/* Checks a definition: counts and ranges (states' transition ranges, space
 * states' dims 1 or 2, parameters < param_count, ops, phases in [0, 1],
 * finite condition values). err->index: the state or transition. */
lmb_status lmb_mdef_validate(const lmb_mdef *d, uint32_t param_count, lmb_error *err);

/* Checks a space: dims, count, finite positions (1D ascending and
 * distinct), durations >= 0 and finite, triangle and edge indices < count. */
lmb_status lmb_space_validate(const lmb_space *s, lmb_error *err);

/* The weights (count values, summing to 1) of the space's points at x
 * (2D: at (x, y)): 1D, linear between the two points around x (the end
 * point's alone outside); 2D, barycentric in the first triangle holding
 * the point (a point of the space: that point's alone), else along the
 * nearest hull edge (no edge: the first point's). Cannot fail. */
void lmb_space_weights(const lmb_space *s, double x, double y, double *w);

typedef struct lmb_mrun {
    const lmb_mdef *def;    /* NULL: no machine */
    const lmb_space *space; /* NULL: no space playing */
    uint32_t state;
    int32_t slot;   /* a clip state: its source within the layer, else -1 */
    uint8_t dirty;  /* look at it in the next step */
    uint8_t has_x;  /* x holds the value the space was last put at */
    uint8_t marker; /* the space is synced by markers: the caller applies it */
    uint8_t nslots;
    uint8_t synced;  /* the caller syncs the space by markers and this run is due-checked */
    uint8_t restore; /* its rates need putting back before the next run */
    uint8_t slots[LMB_SPACE_MAX]; /* the space's sources within the layer */
    double x[2];
    double el, hi, lo; /* seconds since the last marker record, to the next and previous */
} lmb_mrun;

/* A kept source: what the run played. */
typedef struct lmb_kept {
    int32_t clip;
    float rate, weight;
    uint8_t loop;
    double time, prev;
} lmb_kept;

/* One clip's tracks of the root-motion joint (found once per joint). */
typedef struct lmb_root_tracks {
    lmb_track t, r;       /* translation and rotation tracks (a packed clip: their ids) */
    uint8_t has_t, has_r; /* the clip has them */
    double lap[4];        /* a lap's displacement: translation at the end minus at 0, wrapped yaw */
} lmb_root_tracks;

/* One clip's events (times in seconds, as limber.anim keeps them): sorted,
 * and for looping play with an event at the duration moved to 0. */
typedef struct lmb_clip_events {
    uint32_t count;
    const double *times;      /* count, ascending */
    const double *loop_times; /* count, ascending, in [0, duration) */
} lmb_clip_events;

/* A crossed event: instance, layer, source within the layer (0-based), the
 * clip, the event (index into times, or into loop_times when `looped`) and
 * the source's effective weight. */
typedef struct lmb_event_hit {
    uint32_t instance, layer, source, clip, event;
    int looped;
    double weight;
} lmb_event_hit;

typedef void (*lmb_event_fn)(void *ctx, const lmb_event_hit *hit);

typedef struct lmb_machines {
    lmb_plan *plan; /* borrowed */
    uint32_t instance_count, layer_count;
    lmb_mrun *runs;       /* instance_count * layer_count */
    uint32_t param_count; /* parameters per instance */
    double *param;        /* instance_count * param_count */
    uint8_t *param_type;  /* LMB_PARAM_* */
    uint8_t *kept;        /* instance_count: kept since the last step began */
    uint32_t *kept_list;  /* the kept instances, in keeping order */
    uint32_t kept_count;
    lmb_kept *kept_src;      /* instance_count * source_count */
    float *kept_layer;       /* instance_count * layer_count */
    lmb_root_tracks *roots;  /* per clip of the plan's set, for joint root_joint */
    uint32_t root_joint;     /* UINT32_MAX: roots not found yet */
    lmb_clip_events *events; /* per clip of the plan's set (count 0: none) */
} lmb_machines;

/* Instance i's source k (0-based over the plan) as the last run played it:
 * kept, or as it is. */
void lmb_machines_source(const lmb_machines *m, uint32_t i, uint32_t k, lmb_kept *out);

/* The root motion of instance i in the plan's last run (its step of
 * p->last_dt, as kept): every override layer's source's displacement of
 * joint `joint` (< the skeleton's joints) from its time before to its time
 * after (a looping clip unwrapped: laps add the clip's start-to-end
 * displacement), x, y, z and the yaw about y (wrapped to [-pi, pi) per
 * source), summed by effective weight at the joint (its share of its
 * layer times the layer weight times the mask there, times 1 - w for each
 * override layer above with weight w there). out: dx, dy, dz, dyaw. A clip
 * without a translation track for the joint moves nothing. */
void lmb_machines_root(lmb_machines *m, uint32_t joint, uint32_t i, double out[4]);

/* The events instance i's sources crossed in the plan's last run (as
 * kept), as limber.anim.step crosses them over each source's step (a
 * looping clip: t0 < e <= t1 forward, t1 <= e < t0 backward, once per lap,
 * at most 10000 laps; a clip that does not loop: within its clamped step),
 * for the sources whose effective weight (share of its layer times the
 * layer weight) is above its layer's `threshold[n]` (or above 0 when it is 0): fn is
 * called per event, sources in order (layers bottom-up), events in playback
 * order. */
void lmb_machines_events(const lmb_machines *m, uint32_t i, const double *threshold,
                         lmb_event_fn fn, void *ctx);

/* Before a plan run of dt (finite): every run whose space syncs by markers
 * (synced) is reported as (key, code, el) when its rates need putting back
 * (code bit 1: restore) or when the step passes its next marker forward
 * (el + dt >= hi - 1e-9) or its previous one backward (-(el + dt) >= lo -
 * 1e-9) (code bit 2: the caller lands it there); el is its time since the
 * last record before this step. A run whose step lands nowhere moves el by
 * dt. out_* hold instance_count * layer_count entries at most. Returns the
 * count. */
uint32_t lmb_machines_markers(lmb_machines *m, double dt, uint32_t *out_key, int32_t *out_code,
                              double *out_el);

/* Keeps instance i's sources as they are (once per step). */
void lmb_machines_keep(lmb_machines *m, uint32_t i);

/* Puts the space playing on run `key` at (x, y): its sources' weights move
 * there over `fade` seconds (>= 0; 0: at once) and, synced and not by
 * markers, their rates become duration / weighted mean duration. Records
 * x. Does nothing without a space. */
void lmb_machines_apply(lmb_machines *m, uint32_t key, double x, double y, float fade);

/* Marks every run of instance i that has a machine dirty. */
void lmb_machines_touch(lmb_machines *m, uint32_t i);

/* Whether transition t of run `key` holds after the plan's last step of dt
 * (every condition but a marker). */
int lmb_machines_holds(const lmb_machines *m, uint32_t key, const lmb_mtrans *t, double dt);

/* One step after a plan run of dt: forgets what was kept, then looks at
 * every run that is dirty or in a timed state (clearing dirty): a space
 * state whose space's parameter value changed is applied (its instance
 * kept first), or reported as (key, 0) when the space syncs by markers;
 * the first transition that holds is reported as (key, position + 1), or
 * (key, -(position + 1)) when it also waits for a marker. out_key and
 * out_code hold 2 * instance_count * layer_count entries at most. Returns
 * the number of reports. Cannot fail. */
uint32_t lmb_machines_step(lmb_machines *m, double dt, uint32_t *out_key, int32_t *out_code);

#endif
