// hier_upkeep — what keeping local expansions up to date would cost on the
// GPU (issue 13's design study, bench/NOTES.md, "The upkeep on the GPU"):
// bench/hier_local_fixed.c's cells (level 2 ... L, buffer 1: each cell's
// interaction list is the 189 cells whose parent is within one cell of its
// parent and which are not within one cell of it), each keeping its local
// coefficients L_n^m, 0 <= m <= n <= PM, as 64-bit integers on a
// power-of-two grid, brought up to date after each batch of moves: every
// moved particle's old place leaves (-z) and its new place enters (+z)
// the lists it lies in.  Each cell gathers the changes of its list and adds
// their rounded terms as integers, so the result does not depend on the
// order of the adds: two ways, timed in the same run (gather_atomic, a
// block a cell with 64-bit shared-memory atomics; gather_warp, a warp a
// cell, or a slice of a coarse cell's list, summing in registers).
//
// Per batch: the changes bucketed by cell at every level (a count, a scan,
// a fill), then the gather.  Timed with CUDA events after warm-up batches,
// medians over the batches; every cell's state is read and written once a
// batch (what an eager upkeep costs in memory).  Checked against the host:
// a sample of cells after one batch from zero, the same integers bit for
// bit when built with --fmad=false (-DHU_EXACT), within rounding
// otherwise.
//
//   hier_upkeep N [p [batches [seed]]]     defaults p = 12 (PM = p + 2), 20 batches
//
// Built by the project's build (bench/CMakeLists.txt: nvcc, as the
// plugins' device code is, with FMA and as hier_upkeep_exact without);
// run by bench/gpu_upkeep.sh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cub/device/device_scan.cuh>

#include "bench.h"


constexpr int PMAX = 14, LMAX = 10, NCO = (PMAX + 1) * (PMAX + 2) / 2, BATCH = 1024, MAXCH = 4096;
constexpr double CATION_DENSITY = 1.1447e-6; // Å^-3, PHYSICS.md §2

__host__ __device__ inline int co(int n, int m) { return n * (n + 1) / 2 + m; }

struct geo {
    int L, pm, ncells;    // leaf level, degrees kept, cells of levels 2 ... L
    int off[LMAX + 2];    // the first cell of each level (flat index)
    int S[LMAX + 1];      // gather_warp: warps a cell of each level (slices of its 216 candidates)
    int goff[LMAX + 2];   // the first warp of each level
    int ngroups;
    double Rt;            // cube half side
};
__constant__ geo c_geo;
__constant__ double c_inv_step[LMAX + 1][NCO]; // 1 / Δ per level and (n, m)

__host__ __device__ inline int cell_of(double Rt, int l, double v)
{
    const int ml = 1 << l;
    int c = (int)floor((v + Rt) / (2.0 * Rt / ml));
    return c < 0 ? 0 : c >= ml ? ml - 1 : c;
}

__host__ __device__ inline int flat(const geo &g, int l, int x, int y, int z)
{
    const int ml = 1 << l;
    return g.off[l] + (x * ml + y) * ml + z;
}

// Where column()'s integers go: a block's shared sums, or the host's
// reference (the integers and their magnitudes)
struct shared_add {
    unsigned long long *acc;
    __device__ void operator()(int k, long long v) const { atomicAdd(&acc[k], (unsigned long long)v); }
};
struct host_add {
    long long *ref;
    double *mag;
    __host__ __device__ void operator()(int k, long long v) const
    {
        ref[k] += v;
        mag[k] += v < 0 ? -(double)v : (double)v;
    }
};

// hier_expand's recurrences, one step each (every caller the same
// operations, so the same bits): the diagonal I_k^k from I_(k-1)^(k-1), and
// a column's I_(n+1)^m from I_n^m (a) and I_(n-1)^m (b)
__host__ __device__ inline void diag_step(int k, double ux, double uy, double &mr, double &mi)
{
    const double f = 2.0 * k - 1.0, nr = f * (ux * mr - uy * mi), ni = f * (ux * mi + uy * mr);
    mr = nr;
    mi = ni;
}
__host__ __device__ inline void column_step(int n, int m, double uz, double inv2, double &ar, double &ai, double &br,
                                            double &bi)
{
    const double c1 = (2.0 * (n + 1) - 1.0) * uz, c2 = (double)((n + m) * (n - m)) * inv2;
    const double xr = c1 * ar - c2 * br, xi = c1 * ai - c2 * bi;
    br = ar;
    bi = ai;
    ar = xr;
    ai = xi;
}

// A change's terms for one column m (degrees n = m ... pm) at w = s - c,
// charge z, added as integers by add(k, v): hier_expand's recurrences.
template <typename Add>
__host__ __device__ inline void column(const double *inv_step, int pm, int m, const double w[3], double z, Add add)
{
    const double inv = 1.0 / sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
    const double inv2 = inv * inv, ux = w[0] * inv2, uy = w[1] * inv2, uz = w[2] * inv2;
    double mr = inv, mi = 0.0;
    for (int k = 1; k <= m; ++k) diag_step(k, ux, uy, mr, mi);
    double ar = mr, ai = mi, br = 0.0, bi = 0.0;
    for (int n = m;; ++n) {
        const int k = co(n, m);
        add(2 * k, llrint(z * ar * inv_step[k]));
        if (m) add(2 * k + 1, llrint(z * ai * inv_step[k]));
        if (n == pm) break;
        column_step(n, m, uz, inv2, ar, ai, br, bi);
    }
}

__global__ void count_changes(const float4 *ch, int nch, int *cnt)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nch) return;
    const float4 c = ch[i];
    for (int l = 2; l <= c_geo.L; ++l)
        atomicAdd(&cnt[flat(c_geo, l, cell_of(c_geo.Rt, l, c.x), cell_of(c_geo.Rt, l, c.y), cell_of(c_geo.Rt, l, c.z))],
                  1);
}

__global__ void fill_changes(const float4 *ch, int nch, const int *start, int *fill, int *list)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nch) return;
    const float4 c = ch[i];
    for (int l = 2; l <= c_geo.L; ++l) {
        const int f = flat(c_geo, l, cell_of(c_geo.Rt, l, c.x), cell_of(c_geo.Rt, l, c.y), cell_of(c_geo.Rt, l, c.z));
        list[start[f] + atomicAdd(&fill[f], 1)] = i;
    }
}

// gather_atomic: a block a cell, its list's changes into shared memory,
// then (change, column) tasks over the threads, the integers summed by
// 64-bit shared-memory atomics and added to the cell's state once.
__global__ void __launch_bounds__(128) gather_atomic(const float4 *ch, const int *start, const int *cnt, const int *list,
                                              long long *state, int *touched)
{
    __shared__ unsigned long long acc[2 * NCO];
    __shared__ int mine[MAXCH];
    __shared__ int nmine;
    const geo &g = c_geo;
    const int cell = blockIdx.x;
    int l = 2;
    while (l < g.L && cell >= g.off[l + 1]) ++l;
    const int ml = 1 << l, loc = cell - g.off[l];
    const int cx = loc / (ml * ml), cy = (loc / ml) % ml, cz = loc % ml;
    const double hl = 2.0 * g.Rt / ml;
    const double cc[3] = {-g.Rt + (cx + 0.5) * hl, -g.Rt + (cy + 0.5) * hl, -g.Rt + (cz + 0.5) * hl};
    const int nr = 2 * co(g.pm, g.pm) + 2;
    for (int k = threadIdx.x; k < nr; k += blockDim.x) acc[k] = 0ull;
    if (threadIdx.x == 0) nmine = 0;
    __syncthreads();
    // the 6 x 6 x 6 children of the parent's neighbours, less the 3 x 3 x 3
    // within one cell of this one
    for (int e = threadIdx.x; e < 216; e += blockDim.x) {
        const int sx = 2 * ((cx >> 1) - 1) + e / 36, sy = 2 * ((cy >> 1) - 1) + (e / 6) % 6, sz = 2 * ((cz >> 1) - 1) + e % 6;
        if (sx < 0 || sy < 0 || sz < 0 || sx >= ml || sy >= ml || sz >= ml) continue;
        if (abs(sx - cx) <= 1 && abs(sy - cy) <= 1 && abs(sz - cz) <= 1) continue;
        const int f = flat(g, l, sx, sy, sz), n = cnt[f];
        if (n == 0) continue;
        const int at = atomicAdd(&nmine, n);
        for (int k = 0; k < n && at + k < MAXCH; ++k) mine[at + k] = list[start[f] + k];
    }
    __syncthreads();
    const int nm = nmine;
    if (nm == 0) return;
    if (threadIdx.x == 0) atomicAdd(touched, 1);
    if (nm > MAXCH) {
        if (threadIdx.x == 0) printf("hier_upkeep: cell %d has %d changes in its list (at most %d)\n", cell, nm, MAXCH);
        __trap();
    }
    const int cols = g.pm + 1;
    for (int t = threadIdx.x; t < nm * cols; t += blockDim.x) {
        const int j = mine[t / cols], m = t % cols;
        const float4 c = ch[j];
        const double w[3] = {c.x - cc[0], c.y - cc[1], c.z - cc[2]};
        column(c_inv_step[l], g.pm, m, w, (double)c.w, shared_add{acc});
    }
    __syncthreads();
    long long *s = state + (size_t)cell * nr;
    for (int k = threadIdx.x; k < nr; k += blockDim.x) s[k] += (long long)acc[k];
}

// gather_warp: a warp a (cell, slice); a level-l cell has S_l slices,
// each every S_l-th of its 216 candidate cells, S_l set so that a warp sees
// ~32 changes (a coarse cell's list holds hundreds).  The warp collects
// its slice's changes into shared memory (a prefix sum over the lanes'
// candidates), then lane (q, j), q = lane / 8, j = lane % 8, takes changes
// q, q + 4, ... and the columns m = j and PM - j (the middle lane one): PM
// + 2 values each, the same steps for every lane, summed in registers (the
// indices compile-time: PM a template parameter).  The four quads' sums
// are added by shuffles and the cell's state by 64-bit global atomics
// (integers: any order gives the same sums).  Four blocks an SM (128
// registers, a few spills): 20% faster at 2^20 and 33% at 2^23 than the
// 226 registers of two blocks (bench/NOTES.md).
constexpr int MAXW = 256; // changes a warp
template <int PM>
__global__ void __launch_bounds__(128, 4) gather_warp(const float4 *ch, const int *start, const int *cnt, const int *list,
                                                   long long *state)
{
    constexpr int NV = PM + 2, NR = (PM + 1) * (PM + 2);
    __shared__ int mine[4][MAXW];
    const geo &g = c_geo;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = blockIdx.x * 4 + w;
    if (grp >= g.ngroups) return; // the whole warp
    int l = 2;
    while (l < g.L && grp >= g.goff[l + 1]) ++l;
    const int Sl = g.S[l], slice = (grp - g.goff[l]) % Sl, cell = g.off[l] + (grp - g.goff[l]) / Sl;
    const int ml = 1 << l, loc = cell - g.off[l];
    const int cx = loc / (ml * ml), cy = (loc / ml) % ml, cz = loc % ml;
    const double hl = 2.0 * g.Rt / ml;
    const double cc[3] = {-g.Rt + (cx + 0.5) * hl, -g.Rt + (cy + 0.5) * hl, -g.Rt + (cz + 0.5) * hl};
    int nmine = 0;
    for (int e0 = slice; e0 < 216; e0 += 32 * Sl) {
        const int e = e0 + lane * Sl;
        int nc = 0, f = 0;
        if (e < 216) {
            const int sx = 2 * ((cx >> 1) - 1) + e / 36, sy = 2 * ((cy >> 1) - 1) + (e / 6) % 6,
                      sz = 2 * ((cz >> 1) - 1) + e % 6;
            if (sx >= 0 && sy >= 0 && sz >= 0 && sx < ml && sy < ml && sz < ml &&
                (abs(sx - cx) > 1 || abs(sy - cy) > 1 || abs(sz - cz) > 1)) {
                f = flat(g, l, sx, sy, sz);
                nc = cnt[f];
            }
        }
        int inc = nc;
        for (int o = 1; o < 32; o <<= 1) {
            const int t = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += t;
        }
        const int base = nmine + inc - nc;
        for (int k = 0; k < nc && base + k < MAXW; ++k) mine[w][base + k] = list[start[f] + k];
        nmine += __shfl_sync(0xffffffffu, inc, 31);
    }
    __syncwarp();
    if (nmine == 0) return;
    if (nmine > MAXW) {
        if (lane == 0) printf("hier_upkeep: cell %d slice %d has %d changes (at most %d)\n", cell, slice, nmine, MAXW);
        __trap();
    }
    const int q = lane >> 3, j = lane & 7, m1 = j, m2 = PM - j, len1 = PM - m1 + 1;
    const bool live = m1 <= m2, two = m2 > m1;
    double is[NV];
    long long acc[2 * NV];
#pragma unroll
    for (int s = 0; s < NV; ++s) {
        const int n = s < len1 ? m1 + s : m2 + (s - len1), m = s < len1 ? m1 : m2;
        is[s] = live && (s < len1 || two) ? c_inv_step[l][co(n, m)] : 0.0;
        acc[2 * s] = acc[2 * s + 1] = 0;
    }
    for (int t = q; t < nmine; t += 4) {
        const float4 c = ch[mine[w][t]];
        const double wv[3] = {c.x - cc[0], c.y - cc[1], c.z - cc[2]}, z = (double)c.w;
        const double inv = 1.0 / sqrt(wv[0] * wv[0] + wv[1] * wv[1] + wv[2] * wv[2]);
        const double inv2 = inv * inv, ux = wv[0] * inv2, uy = wv[1] * inv2, uz = wv[2] * inv2;
        // the diagonal to m2, I_m1^m1 kept on the way (column()'s steps)
        double mr = inv, mi = 0.0, d1r = inv, d1i = 0.0;
        for (int k = 1; k <= m2; ++k) {
            diag_step(k, ux, uy, mr, mi);
            if (k == m1) {
                d1r = mr;
                d1i = mi;
            }
        }
        double ar = d1r, ai = d1i, br = 0.0, bi = 0.0;
        int n = m1, m = m1;
#pragma unroll
        for (int s = 0; s < NV; ++s) {
            if (s == len1) { // column m2 from I_m2^m2
                ar = mr;
                ai = mi;
                br = bi = 0.0;
                n = m = m2;
            }
            acc[2 * s] += llrint(z * ar * is[s]);
            acc[2 * s + 1] += llrint(z * ai * is[s]);
            column_step(n, m, uz, inv2, ar, ai, br, bi);
            ++n;
        }
    }
    // the four quads' sums into quad 0, then into the cell's state
#pragma unroll
    for (int s = 0; s < 2 * NV; ++s) {
        acc[s] += __shfl_down_sync(0xffffffffu, acc[s], 16);
        acc[s] += __shfl_down_sync(0xffffffffu, acc[s], 8);
    }
    if (q != 0 || !live) return;
    unsigned long long *st = (unsigned long long *)(state + (size_t)cell * NR);
#pragma unroll
    for (int s = 0; s < NV; ++s) {
        const int n = s < len1 ? m1 + s : m2 + (s - len1), m = s < len1 ? m1 : m2;
        if (s < len1 || two) {
            atomicAdd(&st[2 * co(n, m)], (unsigned long long)acc[2 * s]);
            if (m) atomicAdd(&st[2 * co(n, m) + 1], (unsigned long long)acc[2 * s + 1]);
        }
    }
}

static float4 in_ball(unsigned long long *s, double R, float w)
{
    for (;;) {
        const double x = (2 * urand(s) - 1) * R, y = (2 * urand(s) - 1) * R, z = (2 * urand(s) - 1) * R;
        if (x * x + y * y + z * z <= R * R) return make_float4((float)x, (float)y, (float)z, w);
    }
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 20, p = argc > 2 ? atoi(argv[2]) : 12;
    const int B = argc > 3 ? atoi(argv[3]) : 20, warm = 3;
    unsigned long long seed = argc > 4 ? strtoull(argv[4], nullptr, 10) : 1;
    if (n < 4096 || p < 1 || p + 2 > PMAX || B < 1) {
        fprintf(stderr, "usage: %s N >= 4096 [p, 1 ... %d [batches >= 1 [seed]]]\n", argv[0], PMAX - 2);
        return 2;
    }
    const double R = cbrt(3.0 * (n / 4.0) / CATION_DENSITY / (4.0 * M_PI)), rin = R - 3.75, side = 2.0 * R / 3.0;
    const double want = 6.0 * n / (M_PI * 32.0); // the sampler's depth for 32 a leaf
    geo g{};
    g.L = want > 1.0 ? (int)floor(log(want) / log(8.0) + 0.5) : 0;
    g.pm = p + 2;
    g.Rt = R * (1 + 1e-6);
    if (g.L < 2 || g.L > LMAX) {
        fprintf(stderr, "hier_upkeep: leaf level %d outside 2 ... %d\n", g.L, LMAX);
        return 2;
    }
    for (int l = 2, o = 0; l <= g.L + 1; ++l) {
        g.off[l] = o;
        if (l <= g.L) o += 1 << (3 * l);
    }
    g.ncells = g.off[g.L + 1];
    for (int l = 2, o = 0; l <= g.L + 1; ++l) { // ~32 changes a warp: BATCH changes, 189 of 8^l cells' lists each
        g.goff[l] = o;
        if (l > g.L) break;
        const double expect = BATCH * std::min(1.0, 189.0 / (1 << (3 * l)));
        g.S[l] = std::max(1, std::min(27, (int)ceil(expect / 32.0)));
        o += g.S[l] << (3 * l);
    }
    g.ngroups = g.goff[g.L + 1];
    const int nr = 2 * co(g.pm, g.pm) + 2;
    // the grid: the system's Σ|z| at the list's nearest distance 1.5 h
    // within 2^62 (bench/hier_local_fixed.c)
    std::vector<float4> pos(n);
    double zsum = 0.0;
    for (int i = 0; i < n; ++i) {
        pos[i] = in_ball(&seed, rin, i % 4 ? -1.0f : 3.0f);
        zsum += fabs(pos[i].w);
    }
    static double inv_step[LMAX + 1][NCO];
    for (int l = 2; l <= g.L; ++l) {
        const long double dmin = 1.5L * 2.0L * g.Rt / (1 << l) * (1.0L - 1e-9L);
        for (int nn = 0; nn <= g.pm; ++nn)
            for (int m = 0; m <= nn; ++m) {
                long double f = 1.0L;
                for (int k = 2; k <= nn - m; ++k) f *= k;
                long double f2 = 1.0L;
                for (int k = 2; k <= nn + m; ++k) f2 *= k;
                int e;
                frexpl(zsum * sqrtl(f * f2) / powl(dmin, nn + 1.0L) * 0x1p-62L, &e);
                inv_step[l][co(nn, m)] = ldexp(1.0, -e);
            }
    }
    CK(cudaMemcpyToSymbol(c_geo, &g, sizeof g));
    CK(cudaMemcpyToSymbol(c_inv_step, inv_step, sizeof inv_step));
    // each batch: BATCH moves in the default trial cube, half accepted:
    // the accepted ones' old places out (-z), new places in (+z)
    const int per = BATCH; // changes a batch (BATCH / 2 accepted moves, two places each)
    std::vector<float4> chg((size_t)(B + warm) * per);
    for (int b = 0; b < B + warm; ++b)
        for (int k = 0; k < per / 2; ++k) {
            const int i = (int)(urand(&seed) * n);
            const float4 o = pos[i];
            float4 t;
            do {
                t = make_float4((float)(o.x + (urand(&seed) - 0.5) * side), (float)(o.y + (urand(&seed) - 0.5) * side),
                                (float)(o.z + (urand(&seed) - 0.5) * side), o.w);
            } while ((double)t.x * t.x + (double)t.y * t.y + (double)t.z * t.z > rin * rin);
            chg[(size_t)b * per + 2 * k] = make_float4(o.x, o.y, o.z, -o.w);
            chg[(size_t)b * per + 2 * k + 1] = t;
            pos[i] = t;
        }
    float4 *dch;
    int *dcnt, *dstart, *dfill, *dlist, *dtouched;
    long long *dstate[2]; // gather_atomic's, gather_warp's
    CK(cudaMalloc(&dch, chg.size() * sizeof(float4)));
    CK(cudaMalloc(&dcnt, (g.ncells + 1) * sizeof(int)));
    CK(cudaMalloc(&dstart, (g.ncells + 1) * sizeof(int)));
    CK(cudaMalloc(&dfill, g.ncells * sizeof(int)));
    CK(cudaMalloc(&dtouched, sizeof(int)));
    CK(cudaMemset(dtouched, 0, sizeof(int)));
    CK(cudaMalloc(&dlist, (size_t)per * (g.L - 1) * sizeof(int)));
    for (auto &d : dstate) CK(cudaMalloc(&d, (size_t)g.ncells * nr * sizeof(long long)));
    CK(cudaMemcpy(dch, chg.data(), chg.size() * sizeof(float4), cudaMemcpyHostToDevice));
    for (auto &d : dstate) CK(cudaMemset(d, 0, (size_t)g.ncells * nr * sizeof(long long)));
    size_t tmp_bytes = 0;
    CK(cub::DeviceScan::ExclusiveSum(nullptr, tmp_bytes, dcnt, dstart, g.ncells + 1));
    void *dtmp;
    CK(cudaMalloc(&dtmp, tmp_bytes));
    cudaEvent_t ev[4];
    for (auto &e : ev) CK(cudaEventCreate(&e));
    std::vector<double> t_bucket, t_gather, t_warp;
    long long pairs_first = -1;
    for (int b = 0; b < B + warm; ++b) {
        const float4 *c = dch + (size_t)b * per;
        CK(cudaEventRecord(ev[0]));
        CK(cudaMemsetAsync(dcnt, 0, (g.ncells + 1) * sizeof(int)));
        CK(cudaMemsetAsync(dfill, 0, g.ncells * sizeof(int)));
        count_changes<<<(per + 255) / 256, 256>>>(c, per, dcnt);
        CK(cub::DeviceScan::ExclusiveSum(dtmp, tmp_bytes, dcnt, dstart, g.ncells + 1));
        fill_changes<<<(per + 255) / 256, 256>>>(c, per, dstart, dfill, dlist);
        CK(cudaEventRecord(ev[1]));
        gather_atomic<<<g.ncells, 128>>>(c, dstart, dcnt, dlist, dstate[0], dtouched);
        CK(cudaEventRecord(ev[2]));
        if (g.pm == 14)
            gather_warp<14><<<(g.ngroups + 3) / 4, 128>>>(c, dstart, dcnt, dlist, dstate[1]);
        else
            gather_warp<10><<<(g.ngroups + 3) / 4, 128>>>(c, dstart, dcnt, dlist, dstate[1]);
        CK(cudaEventRecord(ev[3]));
        CK(cudaEventSynchronize(ev[3]));
        CK(cudaGetLastError());
        float a, bb, cl;
        CK(cudaEventElapsedTime(&a, ev[0], ev[1]));
        CK(cudaEventElapsedTime(&bb, ev[1], ev[2]));
        CK(cudaEventElapsedTime(&cl, ev[2], ev[3]));
        if (b >= warm) {
            t_bucket.push_back(a * 1e3);
            t_gather.push_back(bb * 1e3);
            t_warp.push_back(cl * 1e3);
        }
        if (b == 0) { // the check: the first batch from zero against the host
            std::vector<long long> st[2];
            for (int v = 0; v < 2; ++v) {
                st[v].resize((size_t)g.ncells * nr);
                CK(cudaMemcpy(st[v].data(), dstate[v], st[v].size() * sizeof(long long), cudaMemcpyDeviceToHost));
            }
            std::vector<int> cnt(g.ncells + 1), start(g.ncells + 1), list((size_t)per * (g.L - 1));
            CK(cudaMemcpy(cnt.data(), dcnt, cnt.size() * sizeof(int), cudaMemcpyDeviceToHost));
            long long pairs = 0, worst = 0, checked = 0;
            double tol_worst = 0.0;
            unsigned long long cs = 7;
            for (int s = 0; s < 64; ++s) {
                const int l = 2 + s % (g.L - 1), ml = 1 << l;
                const int cell = g.off[l] + (int)(urand(&cs) * (1 << (3 * l)));
                const int loc = cell - g.off[l], cx = loc / (ml * ml), cy = (loc / ml) % ml, cz = loc % ml;
                const double hl = 2.0 * g.Rt / ml;
                const double cc[3] = {-g.Rt + (cx + 0.5) * hl, -g.Rt + (cy + 0.5) * hl, -g.Rt + (cz + 0.5) * hl};
                std::vector<long long> ref(nr, 0);
                std::vector<double> mag(nr, 0.0);
                int nch = 0;
                for (int k = 0; k < per; ++k) {
                    const float4 q = chg[k];
                    const int sx = cell_of(g.Rt, l, q.x), sy = cell_of(g.Rt, l, q.y), sz = cell_of(g.Rt, l, q.z);
                    const int pd = std::max({abs((sx >> 1) - (cx >> 1)), abs((sy >> 1) - (cy >> 1)), abs((sz >> 1) - (cz >> 1))});
                    const int d = std::max({abs(sx - cx), abs(sy - cy), abs(sz - cz)});
                    if (pd > 1 || d <= 1) continue;
                    ++nch;
                    const double w[3] = {q.x - cc[0], q.y - cc[1], q.z - cc[2]};
                    for (int m = 0; m <= g.pm; ++m)
                        column(inv_step[l], g.pm, m, w, (double)q.w, host_add{ref.data(), mag.data()});
                }
                for (int k = 0; k < 2 * nr; ++k) {
                    const long long d = llabs(st[k / nr][(size_t)cell * nr + k % nr] - ref[k % nr]);
                    worst = std::max(worst, d);
                    // FMA's rounding: a few 1e-16 of each term, grown along
                    // the recurrences (~2.4^n): within 1e-9 of Σ|terms|, and
                    // one unit a term for the rounding to the grid
                    const double tol = 1e-9 * mag[k % nr] + nch + 1.0;
                    tol_worst = std::max(tol_worst, d / tol);
                }
                checked += nch;
            }
            // the (cell, change) pairs of this batch: each change in the
            // lists of the cells around it, level by level
            for (int k = 0; k < per; ++k)
                for (int l = 2; l <= g.L; ++l) {
                    const int ml = 1 << l, sx = cell_of(g.Rt, l, chg[k].x), sy = cell_of(g.Rt, l, chg[k].y),
                              sz = cell_of(g.Rt, l, chg[k].z);
                    for (int x = 2 * ((sx >> 1) - 1); x < 2 * ((sx >> 1) + 2); ++x)
                        for (int y = 2 * ((sy >> 1) - 1); y < 2 * ((sy >> 1) + 2); ++y)
                            for (int z = 2 * ((sz >> 1) - 1); z < 2 * ((sz >> 1) + 2); ++z)
                                if (x >= 0 && y >= 0 && z >= 0 && x < ml && y < ml && z < ml &&
                                    std::max({abs(x - sx), abs(y - sy), abs(z - sz)}) > 1)
                                    ++pairs;
                }
            pairs_first = pairs;
#ifdef HU_EXACT
            printf("check (no FMA), both gathers: 64 cells, %lld (cell, change) terms: largest difference %lld (must "
                   "be 0)\n",
                   checked, worst);
            if (worst != 0) return 1;
#else
            printf("check (FMA), both gathers: 64 cells, %lld (cell, change) terms: largest difference %lld, %.3g of its "
                   "tolerance (must be at most 1)\n",
                   checked, worst, tol_worst);
            if (tol_worst > 1.0) return 1;
#endif
        }
    }
    int touched = 0;
    CK(cudaMemcpy(&touched, dtouched, sizeof touched, cudaMemcpyDeviceToHost));
    const double tb = median(t_bucket), ta = median(t_gather), tg = median(t_warp), cells_batch = (double)touched / (B + warm);
    // per (cell, change) pair: (pm + 1)(pm + 2) / 2 values of ~10 flops
    // (the column step's 4 products and 2 differences, 2 coefficients,
    // the charge and the scale) and the diagonal's m steps per column
    const double flops_pair = 10.0 * co(g.pm, g.pm) + 8.0 * g.pm * (g.pm + 1) / 2.0;
    const double bytes = 2.0 * cells_batch * nr * 8.0; // the cells with changes: read and written
    const double gflops = pairs_first * flops_pair / (tg * 1e-6) * 1e-9, gbs = bytes / (tg * 1e-6) * 1e-9;
    printf("| N | leaf level | cells (levels 2 ... L) | cells with changes a batch | degrees kept | (cell, change) pairs "
           "a batch | bucketing µs | gather, shared atomics µs | gather, a warp a cell µs | atomics / warp | warp: GFLOP/s "
           "(%% of 34,000 FP64) | state r+w MB (warp: GB/s, %% of 4,300) |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %d | %d | %d | %.0f | %d | %lld | %.1f | %.1f | %.1f | %.2f | %.0f (%.1f%%) | %.1f (%.0f, %.1f%%) |\n", n,
           g.L, g.ncells, cells_batch, g.pm, pairs_first, tb, ta, tg, ta / tg, gflops, gflops / 340.0, bytes * 1e-6,
           gbs, gbs / 43.0);
    CK(cudaFree(dch));
    CK(cudaFree(dcnt));
    CK(cudaFree(dstart));
    CK(cudaFree(dfill));
    CK(cudaFree(dlist));
    for (auto &d : dstate) CK(cudaFree(d));
    CK(cudaFree(dtmp));
    CK(cudaFree(dtouched));
    return 0;
}
