/* parallel_tempering.h — what the CPU loops (parallel_tempering.c) and the
 * kernels (parallel_tempering.cu) of the parallel tempering sampler share:
 * the layout of the random numbers, one trial move, one exchange decision,
 * the round-trip bookkeeping and the kernels' argument blocks.
 *
 * Random numbers (metro/philox.h), key = metro_philox_key(seed,
 * METRO_PT_KEY).  Every number of a run has fixed coordinates, so both
 * backends draw the same ones whatever their order of work:
 *
 *   local trial t (0 <= t < N) of sweep s of replica r:
 *     counter (t, s mod 2^32, r, METRO_PT_TAG_MOVE | (s >> 32) << 8)
 *     w.x, w.y, w.z: top 24 bits -> displacement dx, dy, dz =
 *                    step * metro_philox_symmetric(w), in (-step, step);
 *     w.w:           top 24 bits -> u = metro_philox_uniform(w.w) in (0,1],
 *                    the Metropolis test (metro_accept);
 *     low bytes of w.x, w.y, w.z -> 24 bits m -> monomer i = m N / 2^24
 *                    (random updating: any monomer, with or without
 *                    repetition; a choice probability off by at most
 *                    N/2^24 leaves detailed balance exact, since a move and
 *                    its reverse pick the same monomer).
 *
 *   exchange of slots (k, k+1) of ladder L in exchange round e:
 *     counter (k, e mod 2^32, L, METRO_PT_TAG_EXCHANGE | (e >> 32) << 8)
 *     w.x -> u = metro_philox_uniform(w.x), the test of Eq. (6).
 *
 * Sweep numbers count every sweep the sampler ran (equilibration too),
 * from 0; exchange round e follows sweep (e + 1) M - 1 and proposes the
 * pairs (k, k+1) with k = e mod 2, e mod 2 + 2, ... (even and odd pairs
 * alternate).
 */
#ifndef METRO_PARALLEL_TEMPERING_H
#define METRO_PARALLEL_TEMPERING_H

#include "metro/hd.h"
#include "metro/philox.h"

#define METRO_PT_KEY 0x50544d43u /* the sampler's constant in the key */
#define METRO_PT_TAG_MOVE 0u
#define METRO_PT_TAG_EXCHANGE 1u

/* One local trial: monomer i moves by (dx, dy, dz); accepted if
 * metro_accept(beta dE, u). */
typedef struct metro_pt_trial {
    int i;
    float dx, dy, dz, u;
} metro_pt_trial;

/* Returns the counter of local trial t of sweep s of replica r. */
METRO_HD metro_philox4 metro_pt_move_counter(uint32_t r, uint64_t s, uint32_t t)
{
    return metro_philox4_make(t, (uint32_t)s, r, METRO_PT_TAG_MOVE | (uint32_t)(s >> 32) << 8);
}

/* Returns the counter of the exchange of slots (k, k+1) of ladder L in
 * round e. */
METRO_HD metro_philox4 metro_pt_exchange_counter(uint32_t L, uint64_t e, uint32_t k)
{
    return metro_philox4_make(k, (uint32_t)e, L, METRO_PT_TAG_EXCHANGE | (uint32_t)(e >> 32) << 8);
}

/* Returns trial t of sweep s of replica r for a chain of n monomers. */
METRO_HD metro_pt_trial metro_pt_make_trial(metro_philox_key_t key, uint32_t r, uint64_t s,
                                            uint32_t t, int n, float step)
{
    metro_philox4 w = metro_philox4x32_10(metro_pt_move_counter(r, s, t), key);
    metro_pt_trial tr;
    uint32_t m = (w.x & 0xffu) | (w.y & 0xffu) << 8 | (w.z & 0xffu) << 16;
    tr.i = (int)metro_philox_below(m, (uint32_t)n, 24);
#ifdef __CUDA_ARCH__
    /* explicit rounding: no fused multiply-add may merge this product into
     * the position update, which the host does as two roundings */
    tr.dx = __fmul_rn(step, metro_philox_symmetric(w.x));
    tr.dy = __fmul_rn(step, metro_philox_symmetric(w.y));
    tr.dz = __fmul_rn(step, metro_philox_symmetric(w.z));
#else
    tr.dx = step * metro_philox_symmetric(w.x);
    tr.dy = step * metro_philox_symmetric(w.y);
    tr.dz = step * metro_philox_symmetric(w.z);
#endif
    tr.u = metro_philox_uniform(w.w);
    return tr;
}

/* Returns p displaced by (dx, dy, dz), rounded alike on both backends. */
METRO_HD metro_float4 metro_pt_displace(metro_float4 p, float dx, float dy, float dz)
{
#ifdef __CUDA_ARCH__
    return metro_f4(__fadd_rn(p.x, dx), __fadd_rn(p.y, dy), __fadd_rn(p.z, dz), p.w);
#else
    return metro_f4(p.x + dx, p.y + dy, p.z + dz, p.w);
#endif
}

/* Eq. (6): exchange the replicas at slots a and a+1 (energies ea, eb,
 * inverse temperatures ba, bb) with p = min(1, exp[(ea - eb)(ba - bb)]).
 * Returns 1 to exchange. */
METRO_HD int metro_pt_exchange_accept(double ea, double eb, double ba, double bb, float u)
{
    return metro_accept(-((ea - eb) * (ba - bb)), u);
}

/* Round trips: a replica's state is 0 until it first reaches the lowest
 * temperature, 1 after it left the lowest (heading up), 2 once it has
 * reached the highest since (heading down); arriving at the lowest in
 * state 2 completes a round trip.  Call for the replica that now occupies
 * the lowest (at_lowest) or highest slot.  With one temperature there is
 * no trip to make.  Returns nothing; updates *state and *trips. */
METRO_HD void metro_pt_visit(int *state, long long *trips, int at_lowest, int at_highest)
{
    if (at_lowest && at_highest) return;
    if (at_lowest) {
        if (*state == 2) ++*trips;
        *state = 1;
    } else if (at_highest && *state == 1) {
        *state = 2;
    }
}

/* ---- kernel argument blocks (passed by value) ----------------------------- */

/* parallel_tempering_sweeps_*: `sweeps` sweeps of every replica. */
typedef struct metro_pt_sweep_args {
    metro_float4 *pos;              /* replicas * n positions (d_pos) */
    double *energy;                 /* running energy of each replica (d_energy) */
    const double *beta;             /* inverse temperature of each slot */
    const int *replica_slot;        /* slot of each replica */
    unsigned long long *accepted;   /* accepted local moves of each replica */
    /* per replica r: [2r] = 1 + the sweep of its first move whose energy
     * change was NaN (0: none), [2r + 1] = that move's particle */
    unsigned long long *nan;
    metro_philox_key_t key;
    unsigned long long sweep0;      /* number of the first sweep */
    const float *step;              /* trial step of each slot */
    int sweeps;
    int n, replicas;                /* bonds: metro_bonded() (metro/device.h) */
    int first;                      /* replicas [first, replicas) advance: this rank's */
} metro_pt_sweep_args;

/* parallel_tempering_exchange: one exchange round, a thread per pair. */
typedef struct metro_pt_exchange_args {
    const double *energy;           /* per replica */
    const double *beta;             /* per slot */
    int *slot_replica;              /* per slot */
    int *replica_slot;              /* per replica */
    int *trip_state;                /* per replica, see metro_pt_visit */
    long long *trips;               /* per replica */
    unsigned long long *xaccepted;  /* per ladder and pair: L * (nr - 1) + k */
    unsigned long long *xattempted;
    metro_philox_key_t key;
    unsigned long long round;       /* e */
    int nr, ladders;
} metro_pt_exchange_args;

/* One exchange round of one ladder's pair k (k = round mod 2, +2, ...):
 * the body both backends run.  Pairs of one round are disjoint, so pairs
 * may run in parallel. */
METRO_HD void metro_pt_exchange_pair(const metro_pt_exchange_args *a, int L, int k)
{
    int sa = L * a->nr + k, sb = sa + 1;
    int ra = a->slot_replica[sa], rb = a->slot_replica[sb];
    metro_philox4 w = metro_philox4x32_10(metro_pt_exchange_counter((uint32_t)L, a->round, (uint32_t)k), a->key);
    int pair = L * (a->nr - 1) + k;
    a->xattempted[pair] += 1;
    if (!metro_pt_exchange_accept(a->energy[ra], a->energy[rb], a->beta[sa], a->beta[sb],
                                  metro_philox_uniform(w.x)))
        return;
    a->xaccepted[pair] += 1;
    a->slot_replica[sa] = rb;
    a->slot_replica[sb] = ra;
    a->replica_slot[rb] = sa;
    a->replica_slot[ra] = sb;
    if (k == 0) metro_pt_visit(&a->trip_state[rb], &a->trips[rb], 1, 0);
    if (k + 1 == a->nr - 1) metro_pt_visit(&a->trip_state[ra], &a->trips[ra], 0, 1);
}

#endif
