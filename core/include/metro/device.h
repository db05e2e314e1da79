/* metro/device.h — the device ABI (include from .cu files only).
 *
 * Device function pointers do not cross dlopen'ed modules (docs/DESIGN.md fact
 * 1), so samplers do not call potentials through pointers.  Samplers call
 * the extern "C" functions below by name; the core generates their
 * definitions at start-up (core/src/compose.c, compiled with NVRTC): the
 * sum of the run's potential terms, each restricted to its species, each
 * reading its own parameter block, and metro_bonded() for the run's chains.
 * nvJitLink links core + generated code + sampler + terms (+ observables),
 * where every call inlines (fact 2), so a sampler's inner loop runs one
 * fused function for the whole energy (docs/COMPOSITION.md).
 *
 * A potential term defines, in its LTO-IR, the same functions under its
 * own name with its parameter block as the first argument
 * (NAME__pair_energy(const void *params, float4 a, float4 b), ...): write
 * them with METRO_TERM(fn), which the build names after the plugin
 * (MetroPlugin.cmake defines METRO_TERM_NAME), so two plugins' device code
 * links together without clashes.
 */
#ifndef METRO_DEVICE_H
#define METRO_DEVICE_H

#ifndef __CUDACC__
#error "metro/device.h is for CUDA sources"
#endif

#include "metro/hd.h"

/* The terms' parameter blocks, defined once by the core's device code:
 * term k's block starts at k * METRO_PARAMS_MAX. */
extern __constant__ __align__(16) unsigned char metro_potential_params[METRO_PARAMS_MAX * METRO_MAX_TERMS];

/* The per-term name of fn: METRO_TERM(pair_energy) is lj_fene__pair_energy
 * in the plugin lj_fene. */
#define METRO__TERM_CAT2(a, b) a##__##b
#define METRO__TERM_CAT(a, b) METRO__TERM_CAT2(a, b)
#define METRO_TERM(fn) METRO__TERM_CAT(METRO_TERM_NAME, fn)

/* What a term defines (P: its parameter block, where the core put it):
 *   float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b)
 *   float METRO_TERM(bond_energy)(const void *P, float4 a, float4 b)     (BONDS terms)
 *   float METRO_TERM(external_energy)(const void *P, float4 a)
 *   float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b)
 *   metro_pd_sum METRO_TERM(pair_delta_begin)(const void *P, float4 trial, float4 old)
 *   void METRO_TERM(pair_delta_add)(const void *P, metro_pd_sum *s, float4 b)
 *   float METRO_TERM(pair_delta_end)(const void *P, const metro_pd_sum *s)
 * each extern "C" __device__, with the meaning of the run-wide function of
 * the same name below.  A term without a pair term returns 0 from its pair
 * functions; METRO_TERM_PAIR_DELTA_SUM_PLAIN writes the three run
 * functions as a plain sum of its pair_delta. */

#ifdef METRO_TERM_NAME
/* The term functions' prototypes, so that one written with another
 * signature (an older ABI's, without P; a double) fails to compile here
 * rather than link and misbehave on the GPU.  (Every plugin's device code
 * is compiled with its name as METRO_TERM_NAME; for samplers and
 * observables these are only declarations.) */
extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b);
extern "C" __device__ float METRO_TERM(bond_energy)(const void *P, float4 a, float4 b);
extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a);
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b);
extern "C" __device__ metro_pd_sum METRO_TERM(pair_delta_begin)(const void *P, float4 trial, float4 old);
extern "C" __device__ void METRO_TERM(pair_delta_add)(const void *P, metro_pd_sum *s, float4 b);
extern "C" __device__ float METRO_TERM(pair_delta_end)(const void *P, const metro_pd_sum *s);
#endif

/* Pair energy of two non-bonded particles; +INFINITY when forbidden. */
extern "C" __device__ float metro_pair_energy(float4 a, float4 b);
/* Whole interaction of two bonded neighbours (used instead of the pair
 * energy for them; the potential decides whether it includes the pair
 * term); +INFINITY when the bond is overstretched. */
extern "C" __device__ float metro_bond_energy(float4 a, float4 b);
/* One-body energy (walls, fields); +INFINITY outside the allowed region. */
extern "C" __device__ float metro_external_energy(float4 a);
/* The change of the pair energy of a particle with partner b (not bonded to
 * it) when it moves from `old` to `trial`: U(trial,b) - U(old,b); +INFINITY
 * when the trial is forbidden (overlap).  `old` is an allowed position
 * (U(old,b) finite: samplers only ever move particles of an allowed
 * configuration); what an old overlap gives is the potential's choice.
 * Every potential defines it (the link fails otherwise, naming it), so a
 * potential can share work between the two energies (the partner's
 * parameters, a prefactor, one overlap test) that two metro_pair_energy
 * calls would do twice. */
extern "C" __device__ float metro_pair_delta(float4 trial, float4 old, float4 b);

/* A run of pair-deltas of one moving particle, for the samplers' partner
 * loops:
 *
 *     metro_pd_sum s = metro_pair_delta_begin(trial, old);
 *     metro_pair_delta_add(&s, b);            for each non-bonded partner b
 *     if (metro_pair_delta_near(&s))          rarely: the same partners again
 *         metro_pair_delta_near_add(&s, b);   for each b, in the same order
 *     float d = metro_pair_delta_end(&s);     Σ_b metro_pair_delta(trial, old, b)
 *
 * d equals that sum up to rounding, and is +INFINITY when the trial is
 * forbidden against any b.  The state is the potential's to use: it may
 * keep a partner-independent factor out of the sum, or test an overlap
 * once at the end.  A potential without such a form defines the three
 * with METRO_TERM_PAIR_DELTA_SUM_PLAIN (below).  Samplers keep runs short (32
 * partners or fewer) and add the results in double.
 *
 * The second pass is the core's, for composites: add keeps the
 * long-ranged term's run and the least squared distance of the run; the
 * short-ranged terms are summed by near_add only when a partner came
 * within their reach.  So the unrolled partner loop carries two FMNMX per
 * partner for them, and no branch that would split it (inlined there, the
 * gated terms took registers and spilled: 1.28x the lone term in brush at
 * 2^20).  For a lone term near() is constant false and the pass vanishes. */
/* (metro_pd_sum: metro/hd.h, so a potential's host code can test its form) */
extern "C" __device__ metro_pd_sum metro_pair_delta_begin(float4 trial, float4 old);
extern "C" __device__ void metro_pair_delta_add(metro_pd_sum *s, float4 b);
extern "C" __device__ bool metro_pair_delta_near(const metro_pd_sum *s);
extern "C" __device__ void metro_pair_delta_near_add(metro_pd_sum *s, float4 b);
extern "C" __device__ float metro_pair_delta_end(const metro_pd_sum *s);

/* The three as a plain sum of metro_pair_delta. */
#define METRO_TERM_PAIR_DELTA_SUM_PLAIN                                                           \
    extern "C" __device__ metro_pd_sum METRO_TERM(pair_delta_begin)(const void *P, float4 trial,     \
                                                                    float4 old)                      \
    {                                                                                                \
        metro_pd_sum s;                                                                              \
        s.t = trial;                                                                                 \
        s.o = old;                                                                                   \
        s.v[0] = s.v[1] = s.v[2] = s.v[3] = 0.0f;                                                    \
        s.flag = false;                                                                              \
        return s;                                                                                    \
    }                                                                                                \
    extern "C" __device__ void METRO_TERM(pair_delta_add)(const void *P, metro_pd_sum *s, float4 b)  \
    {                                                                                                \
        s->v[0] += METRO_TERM(pair_delta)(P, s->t, s->o, b);                                         \
    }                                                                                                \
    extern "C" __device__ float METRO_TERM(pair_delta_end)(const void *P, const metro_pd_sum *s)     \
    {                                                                                                \
        return s->v[0];                                                                              \
    }

/* Whether particle lo is bonded to lo + 1 (the run's chains; generated
 * from the topology, so one chain or chains of one length cost no load,
 * and a system without chains gives a constant false).  false for lo < 0;
 * only meaningful up to lo < particles - 1. */
extern "C" __device__ bool metro_bonded(int lo);

/* The interaction of i and j in a system whose bonds (when chain is set)
 * join index neighbours of one chain.  Every sampler computes pair terms
 * through this so the bonded-pair rule lives in one place. */
static __device__ __forceinline__ float metro_interaction(float4 a, float4 b, int i, int j,
                                                          int chain)
{
    int d = i - j;
    return (chain && (d == 1 || d == -1) && metro_bonded(d == 1 ? j : i)) ? metro_bond_energy(a, b)
                                                                         : metro_pair_energy(a, b);
}

#endif
