// hier_rounds — a batch's decisions in parallel rounds on the GPU (issue
// 13, a design study; bench/NOTES.md, "How sequential a batch's decisions
// are").
//
// Reads batches written by bench/hier_chain_depth (each trial's change from
// everything but its earlier mates, base_j; its threshold −ln u_j; every
// earlier mate's term if accepted, A_ij, or rejected, B_ij; and the
// sequential chain's decisions) and decides them two ways, each checked
// against the chain's decisions (exit 1 on any difference):
//   rounds: a team of W warps a trial (W = 1, 2, 4, 8, each timed) over
//     the whole GPU (a cooperative launch, one grid barrier a round); a
//     trial is decided once its range over the mates still open, widened
//     by the sums' rounding, leaves its threshold on one side, or, with no
//     mate open and too close to call, by the chain's own sum (lane 0, the
//     mates in index order: the same bits);
//   chain: the same rule one trial after another by one warp, which is
//     what a chain of S dependent decisions is without the ranges.
// Prints a table: rounds, trials open after the first, µs a batch for each
// W and for the one-warp chain (CUDA events after a warm-up, medians); a W
// whose S W / 8 blocks cannot all be resident is not launched (nan).
//
//   hier_rounds FILE [repeats]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench.h"

namespace cg = cooperative_groups;


struct batch {
    const double *base, *thr, *A, *B;
};

// Two sums in different orders of at most S + 1 terms (the base and a term
// a mate) each lie within γ_{S+1} Σ|terms| of the real sum, so the chain's
// sum lies within twice that of a range's ends.
__device__ __forceinline__ double tolerance(int S, double mag)
{
    return 2.0 * 1.01 * (S + 1) * 0x1p-53 * mag;
}

// The chain's own sum: lane 0, the mates in index order, as the reference
__device__ int exact_decision(const batch &b, int S, int j, const signed char *kn)
{
    double e = b.base[j];
    for (int i = 0; i < j; ++i) e += kn[i] ? b.A[(size_t)j * S + i] : b.B[(size_t)j * S + i];
    return e < b.thr[j];
}

// Trial j's decision from what kn says of its mates (−1 open): 1 or 0, or −1
// while its range holds the threshold.  A team of W warps of one block
// (warps t0 … t0 + W − 1) calls it together, each summing every W-th slice
// of 32 mates; red: the block's shared slots for the team's partial sums.
template <int W>
__device__ int decide(const batch &b, int S, int j, const signed char *kn, double (*red)[4], bool need = true)
{
    const int lane = threadIdx.x & 31, wt = (threadIdx.x >> 5) % W, t0 = (threadIdx.x >> 5) - wt;
    const double base = b.base[j], thr = b.thr[j];
    double lo = 0.0, hi = 0.0, mag = 0.0;
    int open = 0;
    const double *ra = b.A + (size_t)j * S, *rb = b.B + (size_t)j * S;
#pragma unroll 4
    for (int i = wt * 32 + lane; need && i < j; i += 32 * W) {
        const double a = ra[i], c = rb[i];
        const int k = kn[i];
        const double l = k < 0 ? fmin(a, c) : (k ? a : c), h = k < 0 ? fmax(a, c) : l;
        lo += l;
        hi += h;
        mag += (isfinite(a) ? fabs(a) : 0.0) + (isfinite(c) ? fabs(c) : 0.0);
        open |= k < 0;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        lo += __shfl_xor_sync(0xffffffffu, lo, o);
        hi += __shfl_xor_sync(0xffffffffu, hi, o);
        mag += __shfl_xor_sync(0xffffffffu, mag, o);
    }
    open = __any_sync(0xffffffffu, open);
    if (W > 1) { // the team's warps' sums, in the same order for every warp
        if (lane == 0) {
            red[t0 + wt][0] = lo;
            red[t0 + wt][1] = hi;
            red[t0 + wt][2] = mag;
            red[t0 + wt][3] = open;
        }
        __syncthreads();
        lo = hi = mag = 0.0;
        open = 0;
        for (int v = 0; v < W; ++v) {
            lo += red[t0 + v][0];
            hi += red[t0 + v][1];
            mag += red[t0 + v][2];
            open |= red[t0 + v][3] != 0.0;
        }
        __syncthreads();
    }
    if (!need) return -1;
    if (isinf(base)) return 0; // outside the wall or touching a non-mate
    lo += base;
    hi += base;
    const double tol = tolerance(S, mag + fabs(base));
    if (hi + tol < thr) return 1;
    if (lo - tol >= thr) return 0;
    if (open) return -1;
    int d = 0;
    if (lane == 0) d = exact_decision(b, S, j, kn);
    return __shfl_sync(0xffffffffu, d, 0);
}

// kn: two buffers of S decisions (round r reads r − 1's, writes r's);
// cnt[r]: trials open after round r.  Teams of W warps, blocks of 8 warps,
// a team a trial (the launch has exactly S teams, so every team of a block
// meets the block's barriers).
template <int W> __global__ void __launch_bounds__(256) rounds(batch b, int S, signed char *kn, int *cnt, int *nround)
{
    __shared__ double red[8][4];
    cg::grid_group g = cg::this_grid();
    const int team = blockIdx.x * (8 / W) + (threadIdx.x >> 5) / W, lane = threadIdx.x & 31;
    const bool lead = lane == 0 && (threadIdx.x >> 5) % W == 0;
    for (int r = 1; r <= S; ++r) {
        const signed char *prev = kn + (size_t)((r - 1) & 1) * S;
        signed char *cur = kn + (size_t)(r & 1) * S;
        const int j = team;
        int d = prev[j];
        // every team meets the barriers in decide, decided or not
        const int now = decide<W>(b, S, j, prev, red, d < 0);
        if (d < 0) d = now;
        if (lead) {
            cur[j] = (signed char)d;
            if (d < 0) atomicAdd(&cnt[r], 1);
        }
        g.sync();
        if (*(volatile int *)&cnt[r] == 0) {
            if (g.thread_rank() == 0) *nround = r;
            return;
        }
    }
}

// The same rule, one trial after another by one warp
__global__ void chain(batch b, int S, signed char *kn)
{
    for (int j = 0; j < S; ++j) {
        const int d = decide<1>(b, S, j, kn, nullptr); // every mate known: never −1
        if ((threadIdx.x & 31) == 0) kn[j] = (signed char)d;
        __syncwarp();
    }
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// the least of the four teams' times, those not launched (nan) left out
static double fastest(const double *t)
{
    double b = INFINITY;
    for (int v = 0; v < 4; ++v)
        if (t[v] < b) b = t[v];
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hier_rounds FILE [repeats]\n");
        return 2;
    }
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    int head[3];
    if (fread(head, sizeof head, 1, f) != 1 || head[0] != 0x31444348 || head[1] < 2 || head[1] > 16384 || head[2] < 1) {
        fprintf(stderr, "hier_rounds: %s is not a file of bench/hier_chain_depth's batches (2 <= S <= 16384)\n",
                argv[1]);
        return 1;
    }
    const int S = head[1], nb = head[2];
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    // teams of W warps, a team a trial: S W / 8 blocks of 256 threads, all
    // resident at once (a cooperative launch)
    const int teams[4] = {1, 2, 4, 8};
    void *kern[4] = {(void *)rounds<1>, (void *)rounds<2>, (void *)rounds<4>, (void *)rounds<8>};
    int blocks[4];
    for (int v = 0; v < 4; ++v) {
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern[v], 256, 0));
        blocks[v] = (S * teams[v] + 7) / 8;
        if ((S * teams[v]) % 8 || blocks[v] > per_sm * prop.multiProcessorCount) blocks[v] = 0; // cannot launch
    }
    if (!blocks[0] && !blocks[1] && !blocks[2] && !blocks[3]) {
        fprintf(stderr, "hier_rounds: S = %d: no team size fits (S W a multiple of 8, S W / 8 blocks resident)\n", S);
        return 1;
    }
    printf("%s, %d SMs; %d batches of %d trials (%s); rounds: a team of W warps a trial, blocks of 256 threads\n",
           prop.name, prop.multiProcessorCount, nb, S, argv[1]);
    const size_t ss = (size_t)S * S;
    std::vector<double> base(S), thr(S), A(ss), B(ss);
    std::vector<signed char> truth(S), got(S);
    double *d_base, *d_thr, *d_A, *d_B;
    signed char *d_kn;
    int *d_cnt, *d_nr;
    CK(cudaMalloc(&d_base, S * sizeof(double)));
    CK(cudaMalloc(&d_thr, S * sizeof(double)));
    CK(cudaMalloc(&d_A, ss * sizeof(double)));
    CK(cudaMalloc(&d_B, ss * sizeof(double)));
    CK(cudaMalloc(&d_kn, 2 * S));
    CK(cudaMalloc(&d_cnt, (S + 1) * sizeof(int)));
    CK(cudaMalloc(&d_nr, sizeof(int)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("| batch | rounds | open after round 1 | rounds µs a batch: W = 1 | 2 | 4 | 8 | one warp, one trial after "
           "another: µs a batch | ratio to the best W |\n|---|---|---|---|---|---|---|---|---|\n");
    std::vector<double> all[5];
    int bad = 0;
    for (int k = 0; k < nb; ++k) {
        if (fread(base.data(), sizeof(double), S, f) != (size_t)S || fread(thr.data(), sizeof(double), S, f) != (size_t)S ||
            fread(A.data(), sizeof(double), ss, f) != ss || fread(B.data(), sizeof(double), ss, f) != ss ||
            fread(truth.data(), 1, S, f) != (size_t)S) {
            fprintf(stderr, "hier_rounds: %s: batch %d is cut short\n", argv[1], k);
            return 1;
        }
        CK(cudaMemcpy(d_base, base.data(), S * sizeof(double), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_thr, thr.data(), S * sizeof(double), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_A, A.data(), ss * sizeof(double), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_B, B.data(), ss * sizeof(double), cudaMemcpyHostToDevice));
        batch b{d_base, d_thr, d_A, d_B};
        double med[5];
        int nr = 0, open1 = 0;
        for (int v = 0; v < 5; ++v) { // the four team sizes, then the one-warp chain
            std::vector<double> t;
            if (v < 4 && !blocks[v]) {
                med[v] = NAN;
                continue;
            }
            for (int rep = 0; rep < reps + 2; ++rep) { // the first two: warm-up
                CK(cudaMemset(d_kn, -1, 2 * S));
                CK(cudaMemset(d_cnt, 0, (S + 1) * sizeof(int)));
                int s_ = S;
                void *args[] = {&b, &s_, &d_kn, &d_cnt, &d_nr};
                CK(cudaEventRecord(e0));
                if (v < 4)
                    CK(cudaLaunchCooperativeKernel(kern[v], blocks[v], 256, args, 0, 0));
                else
                    chain<<<1, 32>>>(b, S, d_kn);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaGetLastError());
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (rep >= 2) t.push_back(ms * 1e3);
                if (rep > 0) continue;
                int r = 0;
                if (v < 4) {
                    CK(cudaMemcpy(&r, d_nr, sizeof r, cudaMemcpyDeviceToHost));
                    if (v == 0) {
                        nr = r;
                        CK(cudaMemcpy(&open1, d_cnt + 1, sizeof open1, cudaMemcpyDeviceToHost));
                    } else if (r != nr && bad++ < 5)
                        fprintf(stderr, "hier_rounds: batch %d: %d rounds with teams of %d, %d with one warp\n", k, r,
                                teams[v], nr);
                }
                CK(cudaMemcpy(got.data(), d_kn + (size_t)(r & 1) * S, S, cudaMemcpyDeviceToHost));
                for (int j = 0; j < S; ++j)
                    if (got[j] != truth[j] && bad++ < 5)
                        fprintf(stderr, "hier_rounds: batch %d trial %d: %s %d decided %d, the chain %d\n", k, j,
                                v < 4 ? "rounds, teams of" : "the one-warp chain", v < 4 ? teams[v] : 1, got[j], truth[j]);
            }
            med[v] = median(t);
            all[v].push_back(med[v]);
        }
        const double best = fastest(med);
        printf("| %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0fx |\n", k, nr, open1, med[0], med[1], med[2],
               med[3], med[4], med[4] / best);
    }
    double m[5];
    for (int v = 0; v < 5; ++v) m[v] = all[v].empty() ? NAN : median(all[v]);
    printf("| median of %d | | | %.1f | %.1f | %.1f | %.1f | %.0f | %.0fx |\n", nb, m[0], m[1], m[2], m[3], m[4],
           m[4] / fastest(m));
    if (bad) {
        fprintf(stderr, "hier_rounds: %d decisions differ from the chain's\n", bad);
        return 1;
    }
    printf("every decision the chain's (%d batches)\n", nb);
    return 0;
}
