/* pair_correlation.cu — the pair histograms of central ions on the GPU.
 *
 * pair_correlation_cells: the pair counts alone, from the host's cell list
 * (pc_accum.h): O(N_central x neighbours within about r_max).  One thread
 * per central ion, in cell order, so the threads of a warp mostly read the
 * same partner cells (one load serves the warp).  Same pairs, same
 * rounding as every other path: the same counts.
 *
 * pair_correlation_histogram: every pair, O(N_central x N), when the
 * potential at each central ion from all others is summed as well.
 *
 * One thread per central ion, blocks of exactly PC_TILE threads.  Partners
 * are read in tiles of PC_TILE particles staged in shared memory, in index
 * order, so each thread meets its partners in the same order as the CPU
 * loop (pc_accum.c) and sums the potential in float over one tile, then in
 * double: identical per-ion sums on both backends.  Pair distances and bins
 * come from pair_correlation.h with IEEE-rounded intrinsics (no FMA
 * contraction), so every pair lands in the same bin as on the CPU.
 *
 * Counts (both kernels) go into a block-private histogram in shared memory
 * (unsigned int: at most PC_TILE x N pairs per block, so only for N < 2^24,
 * histogram_gpu decides) when it fits in 48 KB, else straight into the
 * global one; the block then adds its
 * counts to the global 64-bit histogram.  Only pairs closer than r_max are
 * counted, a small fraction of all pairs in a large cell, so atomics are
 * rare.
 */
#include "metro/device.h"

#include "pair_correlation.h"

extern "C" __global__ void pair_correlation_histogram(const float4 *__restrict__ pos,
                                                      const int *__restrict__ central, pc_launch L,
                                                      unsigned long long *hist, double *psi,
                                                      int use_shared)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float4 *tile = (float4 *)smem;
    double *sh_psi = (double *)(tile + PC_TILE);
    unsigned int *sh_hist = (unsigned int *)(sh_psi + METRO_MAX_SPECIES);
    __shared__ float sh_z[METRO_MAX_SPECIES]; /* indexed by species: not in registers */
    const int S = L.species, bins = L.bins, n = L.n, want_psi = L.psi;
    const float rmax2 = L.rmax2, inv_dr = L.inv_dr;
    const int nh = S * S * bins;
    const int tid = threadIdx.x;

    if (use_shared)
        for (int i = tid; i < nh; i += PC_TILE) sh_hist[i] = 0u;
    if (tid < METRO_MAX_SPECIES) sh_psi[tid] = 0.0;
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < METRO_MAX_SPECIES; s++) sh_z[s] = L.z[s]; /* constant indices */
    }
    __syncthreads();

    const int c = blockIdx.x * PC_TILE + tid;
    const int valid = c < L.n_central;
    const int i = valid ? central[c] : -1;
    const float4 p = valid ? pos[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    const int a = pc_species(p.w, S);
    double acc = 0.0;

    for (int base = 0; base < n; base += PC_TILE) {
        /* every thread takes part in staging and in both barriers */
        if (base + tid < n) tile[tid] = pos[base + tid];
        __syncthreads();
        const int cnt = n - base < PC_TILE ? n - base : PC_TILE;
        if (valid) {
            float s = 0.0f;
            for (int k = 0; k < cnt; k++) {
                const int j = base + k;
                if (j == i) continue;
                const float4 q = tile[k];
                const int b = pc_species(q.w, S);
                const float r2 = pc_dist2(p, q);
                const int bin = pc_bin(r2, rmax2, inv_dr, bins);
                if (bin >= 0) {
                    const int slot = (a * S + b) * bins + bin;
                    if (use_shared)
                        atomicAdd(&sh_hist[slot], 1u);
                    else
                        atomicAdd(&hist[slot], 1ull);
                }
                if (want_psi) s = PC_ADD(s, PC_MUL(sh_z[b], pc_inv_r(r2)));
            }
            acc += (double)s;
        }
        __syncthreads(); /* the tile is overwritten next round */
    }

    if (valid && want_psi) atomicAdd(&sh_psi[a], acc);
    __syncthreads();
    if (use_shared)
        for (int k = tid; k < nh; k += PC_TILE)
            if (sh_hist[k]) atomicAdd(&hist[k], (unsigned long long)sh_hist[k]);
    if (tid < S && want_psi && sh_psi[tid] != 0.0) atomicAdd(&psi[tid], sh_psi[tid]);
}

extern "C" __global__ void pair_correlation_cells(const float4 *__restrict__ sp, const int *__restrict__ start,
                                                  const int *__restrict__ cq, const int *__restrict__ ccell,
                                                  int m0, int m1, int m2, pc_launch L,
                                                  unsigned long long *hist, int use_shared)
{
    extern __shared__ __align__(16) unsigned int sh_cnt[];
    const int S = L.species, bins = L.bins;
    const float rmax2 = L.rmax2, inv_dr = L.inv_dr;
    const int nh = S * S * bins;
    const int tid = threadIdx.x;
    if (use_shared) {
        for (int i = tid; i < nh; i += PC_TILE) sh_cnt[i] = 0u;
        __syncthreads();
    }
    const int c = blockIdx.x * PC_TILE + tid;
    if (c < L.n_central) {
        const int qi = cq[c];
        const float4 p = sp[qi];
        const int row = pc_species(p.w, S) * S * bins;
        int q0[9], q1[9];
        const int cols = pc_columns(ccell[c], m0, m1, m2, start, q0, q1);
        for (int k = 0; k < cols; k++)
            for (int q = q0[k]; q < q1[k]; q++) {
                if (q == qi) continue;
                const float4 o = sp[q];
                const int bin = pc_bin(pc_dist2(p, o), rmax2, inv_dr, bins);
                if (bin < 0) continue;
                const int slot = row + pc_species(o.w, S) * bins + bin;
                if (use_shared)
                    atomicAdd(&sh_cnt[slot], 1u);
                else
                    atomicAdd(&hist[slot], 1ull);
            }
    }
    if (use_shared) {
        __syncthreads();
        for (int k = tid; k < nh; k += PC_TILE)
            if (sh_cnt[k]) atomicAdd(&hist[k], (unsigned long long)sh_cnt[k]);
    }
}
