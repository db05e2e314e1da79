/* parallel_tempering.cu — the device side of the parallel tempering sampler.
 *
 * Local moves: a group of G lanes (G = 4, 8, 16 or 32: 32/G replicas per
 * warp) runs one replica.  Its chain sits in shared memory (or, when N is
 * too large for that, stays in global memory behind L1).  For every trial
 * the G lanes split the N - 1 partners of the moved monomer, each lane
 * summing e(new) - e(old) over its share in float, and a butterfly of
 * shuffles adds the G partial sums, so every lane holds the same energy
 * change and takes the same decision.  Random numbers come from Philox in
 * the kernel: lane l draws trial t0 + l of the next G trials (the layout of
 * parallel_tempering.h) and hands them out by shuffles, so the generator
 * costs 1/G of a Philox per trial and lane.
 *
 * Bonded neighbours: the pair loop skips i-1 and i+1 (for chains) and four
 * lanes add metro_bond_energy for them afterwards (new and old position,
 * one evaluation each), which is the rule of metro_interaction() (bonded
 * neighbours take the bond energy instead of the pair energy) without a
 * divergent branch inside the pair loop.
 *
 * Exchanges: a thread per proposed pair (metro_pt_exchange_pair), every M
 * sweeps, on the device; coordinates never move, only the slot maps.
 */
#include "metro/device.h"

#include "parallel_tempering.h"

/* Butterfly sum over the G lanes of a group: every lane ends with the same
 * bits (IEEE addition is commutative), so decisions agree across lanes. */
template <int G>
static __device__ __forceinline__ float group_sum(float v, unsigned mask)
{
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o, G);
    return v;
}

/* metro_accept(beta_dE, u), decided without its double-precision exp
 * unless u falls within 1e-4 (relative) of exp(-beta_dE): a float
 * estimate good to ~1e-5 settles all other cases, so the decision is
 * metro_accept's bit for bit (the CPU backend calls metro_accept itself). */
static __device__ __forceinline__ int pt_accept(double beta_dE, float u)
{
    if (!(beta_dE < 1e300)) return 0;
    if (beta_dE <= 0.0) return 1;
    const float e = __expf(-(float)beta_dE);
    if (u < e * 0.9999f) return 1;
    if (u > e * 1.0001f) return 0;
    return metro_accept(beta_dE, u);
}

template <int G, bool SHARED>
static __device__ __forceinline__ void pt_sweeps(const metro_pt_sweep_args a)
{
    extern __shared__ float4 pt_smem[];
    const int lane = threadIdx.x % G;
    const int grp = threadIdx.x / G;
    const int r = a.first + blockIdx.x * (blockDim.x / G) + grp;
    if (r >= a.replicas) return; /* whole groups leave: their lanes share no mask with others */
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (threadIdx.x % 32 / G * G);
    const int n = a.n;
    float4 *gchain = a.pos + (size_t)r * n;
    float4 *chain = gchain;
    if (SHARED) {
        chain = pt_smem + (size_t)grp * n;
        for (int j = lane; j < n; j += G) chain[j] = gchain[j];
        __syncwarp(mask);
    }
    double E = a.energy[r];
    const int slot = a.replica_slot[r];
    const double beta = a.beta[slot];
    const float step = a.step[slot];
    unsigned long long acc = 0, nan_sweep = 0;
    int nan_i = 0;

    for (int s = 0; s < a.sweeps; ++s) {
        const unsigned long long sweep = a.sweep0 + (unsigned long long)s;
        for (int t0 = 0; t0 < n; t0 += G) {
            /* lane l draws trial t0 + l (unused beyond n) */
            metro_pt_trial mine = metro_pt_make_trial(a.key, (uint32_t)r, sweep, (uint32_t)(t0 + lane), n, step);
            const int count = n - t0 < G ? n - t0 : G;
            for (int q = 0; q < count; ++q) {
                const int i = __shfl_sync(mask, mine.i, q, G);
                const float dx = __shfl_sync(mask, mine.dx, q, G);
                const float dy = __shfl_sync(mask, mine.dy, q, G);
                const float dz = __shfl_sync(mask, mine.dz, q, G);
                const float u = __shfl_sync(mask, mine.u, q, G);
                const float4 old = chain[i];
                const float4 nw = metro_pt_displace(old, dx, dy, dz);

                /* partners j from lo to lo + span are skipped, one
                 * compare: i itself and its bonded neighbours (all of
                 * i-1, i+1 along one chain; at a chain's end the next
                 * particle is an ordinary partner).  metro_bonded knows
                 * the topology (constant false without chains), so no
                 * chain flag is needed. */
                const bool b_lo = metro_bonded(i - 1), b_hi = metro_bonded(i);
                const int lo = i - (int)b_lo;
                const unsigned span = (unsigned)b_lo + (unsigned)b_hi;
                float part = 0.0f;
#pragma unroll 4
                for (int j = lane; j < n; j += G) {
                    const float4 pj = chain[j];
                    const float d = metro_pair_energy(nw, pj) - metro_pair_energy(old, pj);
                    part += (unsigned)(j - lo) <= span ? 0.0f : d; /* a select: inf - inf of j == i never enters */
                }
                /* the bonds to i-1 and i+1, new and old: one evaluation in
                 * each of lanes 0-3; the external term, new and old, in
                 * lanes 4-5 (0-1 when G = 4).  A select keeps what counts. */
                {
                    /* lanes 0-1 ask metro_bonded(i - 1), lanes 2-3
                     * metro_bonded(i) (fewer instructions than selecting
                     * between b_lo and b_hi) */
                    const int nb = (lane & 2) ? i + 1 : i - 1;
                    const bool bonded = lane < 4 && metro_bonded((lane & 2) ? i : i - 1);
                    const float4 me = (lane & 1) ? old : nw;
                    const float eb = metro_bond_energy(me, chain[nb < 0 ? 0 : (nb >= n ? n - 1 : nb)]);
                    part += bonded ? ((lane & 1) ? -eb : eb) : 0.0f;
                    const int xl = G > 4 ? lane - 4 : lane;
                    const float ex = metro_external_energy(xl == 1 ? old : nw);
                    part += xl == 0 ? ex : (xl == 1 ? -ex : 0.0f);
                }
                const double dE = (double)group_sum<G>(part, mask);
                if (pt_accept(beta * dE, u)) { /* the same in every lane of the group */
                    __syncwarp(mask);              /* all reads of chain[i] are done */
                    if (lane == 0) chain[i] = nw;
                    __syncwarp(mask);              /* the write is seen by the next trial */
                    E += dE;
                    ++acc;
                } else if (dE != dE && !nan_sweep) {
                    /* rejected as an overlap is: a potential's bug would
                     * bias the chain without a word (the host stops the run) */
                    nan_sweep = sweep + 1;
                    nan_i = i;
                }
            }
        }
    }

    if (SHARED)
        for (int j = lane; j < n; j += G) gchain[j] = chain[j];
    if (lane == 0) {
        a.energy[r] = E;
        a.accepted[r] += acc;
        if (nan_sweep && !a.nan[2 * r]) {
            a.nan[2 * r] = nan_sweep;
            a.nan[2 * r + 1] = (unsigned long long)nan_i;
        }
    }
}

#define METRO_PT_SWEEPS(G)                                                                     \
    extern "C" __global__ void __launch_bounds__(128) parallel_tempering_sweeps_g##G##_shared( \
        const metro_pt_sweep_args a)                                                           \
    {                                                                                          \
        pt_sweeps<G, true>(a);                                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(128) parallel_tempering_sweeps_g##G##_global( \
        const metro_pt_sweep_args a)                                                           \
    {                                                                                          \
        pt_sweeps<G, false>(a);                                                                \
    }

METRO_PT_SWEEPS(4)
METRO_PT_SWEEPS(8)
METRO_PT_SWEEPS(16)
METRO_PT_SWEEPS(32)

/* One exchange round: thread p of ladder L (grid-stride over L * pairs)
 * proposes pair k = 2p + round mod 2. */
extern "C" __global__ void parallel_tempering_exchange(metro_pt_exchange_args a)
{
    const int parity = (int)(a.round & 1ull);
    const int pairs = (a.nr - parity) / 2; /* pairs (k, k+1) with k+1 < nr */
    const long long total = (long long)pairs * a.ladders;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int L = (int)(idx / pairs);
        const int k = 2 * (int)(idx % pairs) + parity;
        metro_pt_exchange_pair(&a, L, k);
    }
}
