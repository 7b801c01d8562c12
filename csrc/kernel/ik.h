/* ik.h: inverse kinematics on pose batches, batched over instances (jobs
 * that validate, then run).
 *
 * Both solvers first bring the model matrices of their instances up to
 * date (local-to-model from each instance's first changed joint), read them,
 * compute in double precision, write the local rotations of the joints they
 * turn, and then update the model matrices of the instances they solved
 * (the turned joints and all their descendants). Targets and poles are in
 * the pose's model space (the space of its model matrices: with a root
 * matrix set, the world). Rotations are carried to local space through the
 * parents' model rotations, so parents with non-uniform scale are
 * approximated (their scale is taken as uniform).
 *
 * Two-bone IK (thigh-knee-foot): joints root, mid, tip with mid below root
 * and tip below mid. Bone lengths l1 = |mid - root| and l2 = |tip - mid|
 * never change. The tip is placed at distance d = clamp(|target - root|,
 * |l1 - l2|, l1 + l2) from the root toward the target (softened near full
 * extension when soften < 1: distances above soften * (l1 + l2) approach
 * l1 + l2 smoothly and never reach it); so a reachable target is reached
 * (to float rounding) and an unreachable one gives the straight chain
 * pointing at it. The mid joint bends in the plane of root, target and
 * pole, on the pole's side (no pole, or a pole on the root-target line: the
 * current bend plane). The root turns by the smallest rotation taking the
 * mid joint to its new place, the mid joint by the smallest taking the tip
 * to its place; with weight w < 1 both turn by w of their rotation (slerp
 * from identity). keep_tip: the tip keeps its model-space rotation from
 * before (a foot stays flat); otherwise it follows the mid joint.
 *
 * Aim: joint `joint` turns so that `forward` (a direction in the local
 * frame of joint `effector`, which is `joint` or one of its descendants)
 * points from the effector toward the target: the smallest rotation, about
 * the joint, limited to `limit` radians (0: none) and taken by `weight`.
 * With an `up` axis (effector-local) and a pole, a twist about the aimed
 * direction then brings `up` as close as it goes to the pole direction.
 * Chains (spine, neck, head aiming the head) run one job per joint, root
 * first, each with its share as weight and the head as effector. */
#ifndef LIMBER_IK_H
#define LIMBER_IK_H

#include "pose.h"

typedef struct lmb_ik_two_bone {
    lmb_pose *pose;
    uint32_t root, mid, tip; /* joints, tip below mid below root */
    uint32_t first, count;   /* instances [first, first + count) */
    const float *targets;    /* count * 3, model space */
    const float *poles;      /* count * 3 or NULL */
    const uint8_t *pole_on;  /* count or NULL: with poles, instance k has one iff pole_on[k] */
    const float *weights;    /* count or NULL (1) */
    float soften;            /* (0, 1]; 1: none */
    int keep_tip;            /* the tip keeps its model rotation */
} lmb_ik_two_bone;

/* Rules (err->field): "joints" (LMB_ERANGE: a joint out of range;
 * LMB_EINVAL: mid not below root or tip not below mid, or two equal),
 * "instances" (first + count beyond the pose), "targets" / "poles" /
 * "weights" (LMB_ENAN: a non-finite number, index = the instance in the
 * job), "weights" (LMB_ERANGE: outside [0, 1]), "soften" (outside (0, 1]).
 * No side effects. */
lmb_status lmb_ik_two_bone_validate(const lmb_ik_two_bone *job, lmb_error *err);

/* Solves every instance of a validated job and updates their model
 * matrices. Cannot fail. */
void lmb_ik_two_bone_run(const lmb_ik_two_bone *job);

typedef struct lmb_ik_aim {
    lmb_pose *pose;
    uint32_t joint, effector; /* the effector is the joint or below it */
    uint32_t first, count;
    float forward[3];       /* effector-local, non-zero */
    float up[3];            /* effector-local; zero: no twist */
    const float *targets;   /* count * 3 */
    const float *poles;     /* count * 3 or NULL (no twist) */
    const uint8_t *pole_on; /* count or NULL, as in lmb_ik_two_bone */
    const float *weights;   /* count or NULL (1) */
    float limit;            /* largest turn in radians, in (0, pi]; 0: none */
} lmb_ik_aim;

/* Rules as lmb_ik_two_bone_validate, plus "forward" (zero or not finite),
 * "up" (not finite), "limit" (outside [0, pi]) and "joints" (the effector
 * not the joint nor below it). No side effects. */
lmb_status lmb_ik_aim_validate(const lmb_ik_aim *job, lmb_error *err);

void lmb_ik_aim_run(const lmb_ik_aim *job);

#endif
