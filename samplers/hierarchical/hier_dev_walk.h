/* hier_dev_walk.h — the walks: a point's enclosure (the first and the
 * refined look) and the total energy's sum from whole walks.  A part of
 * hierarchical.cu, included from it after hier_dev_tree.h; not a header
 * of its own. */

/* ---- the enclosure of a point: a warp walks the tree level by level ----- */

/* Point p of the batch: 2k the trial of mate k, 2k + 1 its old position.
 * Against every particle at its place at the batch's start; the moving ion
 * itself left out (its far image subtracted, as hier_tree.c does), and a
 * mate whose place overlaps the point left out of the sum (the chain
 * counts that overlap: hg_tri).  mode:
 *   HG_WALK_FIRST   the first look (order p_lo, theta);
 *   HG_WALK_REFINE  the refined look (order pm - HIER_EXTRA at
 *                   HIER_THETA_REFINE theta) of the trials hg_close_list
 *                   listed: p = 2e + (0 trial, 1 old place) for the e-th,
 *                   written over that trial's first look;
 *   HG_WALK_WHOLE   the total energy (hier_gpu_total): point p is particle
 *                   b0 + p at its place, p < S, against every other
 *                   particle; no mates, so every overlap counts.
 * A point's walk is one warp's, except in the refined look, which few
 * trials take and whose time is one walk's latency: there a team of the
 * block's warps (all of them, or a share of them when the block splits:
 * hg_enclose) walk one point together.  Each level's candidates go
 * round by round, warp w taking the round's w-th 32, and the queues are
 * filled in candidate order (each warp's offset from the team's counts),
 * so the frontier is the single warp's; each warp sums its own lanes and
 * the team adds the warps in order: the same bits on every run. */
static __device__ __forceinline__ void hg_team_sync(int team, int bar)
{
    if (team > 1)
        asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(32 * team) : "memory");
    else
        __syncwarp();
}

/* One near partner id (place b, charge bq, radius br) of the point x of a
 * moving ion of species row sa: coulomb_hs_pair's float hard-core test,
 * then its term into Sf (the reference's float energy, or in double when
 * dbl) and |z|/r into Phid.  An overlap with a mate (ids [b0 - Sp, mate_hi):
 * the batch's and, when batches overlap, the previous batch's) is
 * the chain's to count; another sets overlap (at the trial) or degenerate. */
static __device__ __forceinline__ void hg_near(const hg_args &a, float4 x, float4 sa, float4 b, float bq, float br,
                                               int id, int mate_hi, int is_t, bool dbl, double &Sf, double &Phid,
                                               long long &nd, int &overlap, int &degenerate)
{
    const float r2 = hg_r2(x.x, x.y, x.z, b.x, b.y, b.z);
    const float dmin = __fadd_rn(sa.y, br);
    if (r2 < __fmul_rn(dmin, dmin) || r2 == 0.0f) {
        if (id >= a.b0 - a.Sp && id < mate_hi) return;
        if (r2 != 0.0f && is_t) overlap = 1;
        else degenerate = 1;
        return;
    }
    const float inv = hg_inv(r2);
    Sf += dbl ? hg_exact_term(sa.z, bq, x, b) : (double)__fmul_rn(__fmul_rn(sa.z, bq), inv);
    Phid += (double)fabsf(bq) * (double)inv;
    ++nd;
}

/* a block is a team of up to HG_TEAM_MAX warps (the refined look) or
 * HG_WARPS warps with a point each: 128 registers a thread either way */
static __device__ __forceinline__ void hg_enclose_body(const hg_args &a, int mode, int narrow)
{
    __shared__ int tcnt[2][2][HG_TEAM_MAX];      /* a round's pushes and near leaves per warp, by parity */
    __shared__ double tsum[HG_TEAM_MAX][8];
    __shared__ int tflag[HG_TEAM_MAX][3];
    __shared__ unsigned fq[HG_TEAM_MAX][64];     /* each warp's far cells waiting for lanes: a ring */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int whole = mode == HG_WALK_WHOLE, refined = mode == HG_WALK_REFINE;
    /* reference = exact: the refined look sums its near partners in double,
     * so its floor is double rounding (hier_floor) */
    const bool dbl = refined && a.ideal;
    /* the refined look: a block's warps walk one point together, or,
     * when the points are more than the blocks the device holds at once,
     * split into 2, 4, ... teams that walk a point each (fewer warps a
     * point, but no second wave of blocks: at 2^20 with the float
     * reference, hundreds of points, 0.49 s of refined looks in teams of
     * 16 against 0.31 s split); each team its own named barrier */
    const int nwb = (int)(blockDim.x >> 5), npts = refined ? 2 * *a.nclist : 0;
    /* hg_enclose_narrow takes the refined looks whose points the wide
     * blocks would walk in teams smaller than its own and its blocks hold
     * without splitting (refine_narrow 1), or every one (2); the other
     * kernel's blocks leave at once */
    if (refined && a.refine_narrow &&
        narrow != (a.refine_narrow == 2 || (npts > a.refine_narrow_from && npts <= a.refine_slots_narrow)))
        return;
    const int slots = narrow ? a.refine_slots_narrow : a.refine_slots;
    int split = 1;
    while (refined && npts > split * slots && 2 * split <= nwb && nwb % (2 * split) == 0) split *= 2;
    const int team = refined ? nwb / split : 1, wi = team > 1 ? warp % team : 0, bar = 1 + warp / team;
    const int p = refined ? (int)blockIdx.x * split + warp / team : (int)blockIdx.x * nwb + warp;
    if (p >= (whole ? a.S : refined ? npts : 2 * a.S)) return;
    const int k = whole ? p : refined ? a.clist[p >> 1] : p >> 1, is_t = !whole && !(p & 1);
    const int out = whole ? p : 2 * k + (p & 1); /* where the result goes in pts */
    const int q = refined ? a.pm - HIER_EXTRA : a.p_lo;
    const double theta = refined ? a.theta_refine : a.theta;
    const float4 o = whole ? a.pos[a.b0 + k] : a.told[k];
    const float4 x = is_t ? a.ttri[k] : o;
    const int mate_hi = whole ? 0 : a.b0 + a.S; /* mates: [b0, mate_hi) */
    const int skip = a.b0 + k;
    const float4 sa = a.prm.sp[coulomb_hs_species(o.w)];
    const double xd[3] = {(double)x.x, (double)x.y, (double)x.z};
    double skip_r;
    {
        const double dx = xd[0] - (double)o.x, dy = xd[1] - (double)o.y, dz = xd[2] - (double)o.z;
        skip_r = sqrt(dx * dx + dy * dy + dz * dz);
        if (skip_r == 0.0) skip_r = 1.0;
    }
    const double skip_z = (double)sa.x;
    unsigned *front = a.front + (size_t)p * 2 * HG_FRONT, *nearl = a.nearl + (size_t)p * HG_NEAR;
    double S = 0.0, E = 0.0, Er = 0.0, Phi = 0.0, Phif = 0.0, adds = 0.0, Sf = 0.0, Phid = 0.0;
    int overlap = 0, degenerate = 0, err = 0;
    int ncur = 1, nnear = 0, cur = 0;
    int fh = 0, nq = 0; /* the far ring's head and length */
    if (lane == 0 && wi == 0) front[0] = 0u;
    if (a.L == 0) { /* one leaf: the whole cube */
        if (lane == 0 && wi == 0) nearl[0] = 0u;
        nnear = a.count[0] > 0;
    }
    hg_team_sync(team, bar);
    int round = 0;
    for (int l = 1; l <= a.L && !err; ++l) {
        const unsigned *fc = front + cur * HG_FRONT;
        unsigned *fn = front + (cur ^ 1) * HG_FRONT;
        const int ncand = 8 * ncur;
        int nnext = 0;
        const int sl[3] = {hg_coord(&a, l, o.x), hg_coord(&a, l, o.y), hg_coord(&a, l, o.z)};
        for (int c0 = 0; c0 < ncand; c0 += 32 * team, ++round) {
            const int c = c0 + 32 * wi + lane;
            int push = 0, isnear = 0, far = 0;
            unsigned val = 0;
            if (c < ncand) {
                const unsigned e = fc[c >> 3];
                const int ch = c & 7;
                const unsigned dir = (e >> 30) & 1u;
                const int ix = 2 * (int)(e & 1023u) + ((ch >> 2) & 1), iy = 2 * (int)((e >> 10) & 1023u) + ((ch >> 1) & 1),
                          iz = 2 * (int)((e >> 20) & 1023u) + (ch & 1);
                if (l == a.L) {
                    val = hg_morton(ix, iy, iz, a.L);
                    isnear = a.count[val] > 0;
                } else {
                    const long long cell = a.cell0[l] + ((long long)ix * a.m[l] + iy) * a.m[l] + iz;
                    const int cn = a.cnt[cell];
                    val = (unsigned)ix | (unsigned)iy << 10 | (unsigned)iz << 20;
                    if (cn > 0) {
                        if (dir) {
                            push = 1;
                            val |= 1u << 30;
                        } else {
                            const double y[3] = {xd[0] - hg_centre(&a, l, ix), xd[1] - hg_centre(&a, l, iy),
                                                 xd[2] - hg_centre(&a, l, iz)};
                            const double d = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
                            const double rho = a.rho[l];
                            if (rho <= theta * d && d - rho >= a.dcut) {
                                if (cn <= a.direct_max && l >= a.L - 2) {
                                    push = 1;
                                    val |= 1u << 30;
                                } else {
                                    far = 1;
                                }
                            } else {
                                push = 1;
                            }
                        }
                    }
                }
            }
            const unsigned lt = (1u << lane) - 1u;
            const unsigned mp = __ballot_sync(HG_FULL, push), mn = __ballot_sync(HG_FULL, isnear);
            int tp = __popc(mp), tn = __popc(mn), bp = 0, bn = 0;
            if (team > 1) { /* the team's counts; buffers by parity: one barrier a round */
                int(*tc)[HG_TEAM_MAX] = tcnt[round & 1];
                const int tw = warp - wi; /* the team's first warp in the block */
                if (lane == 0) {
                    tc[0][warp] = tp;
                    tc[1][warp] = tn;
                }
                hg_team_sync(team, bar);
                tp = tn = 0;
                for (int w = 0; w < team; ++w) {
                    if (w == wi) bp = tp, bn = tn;
                    tp += tc[0][tw + w];
                    tn += tc[1][tw + w];
                }
            }
            if (nnext + tp > HG_FRONT || nnear + tn > HG_NEAR) {
                err = 1;
                break;
            }
            if (push) fn[nnext + bp + __popc(mp & lt)] = val;
            if (isnear) nearl[nnear + bn + __popc(mn & lt)] = val;
            nnext += tp;
            nnear += tn;
            /* The round's far cells join the warp's ring; they are
             * expanded 32 at a time, a lane each, and the level's rest
             * after its last round (all of one level: l, sl), so the
             * lanes are busy in the expansions, not the few whose
             * candidate happened to be far (the cells, their order and
             * so every lane's sum are the same on every run). */
            const unsigned mf = __ballot_sync(HG_FULL, far);
            if (far) fq[warp][(fh + nq + __popc(mf & lt)) & 63] = val;
            nq += __popc(mf);
            __syncwarp();
            const int last = c0 + 32 * team >= ncand;
            while (nq >= 32 || (last && nq > 0)) {
                const int take = min(nq, 32);
                if (lane < take) {
                    const unsigned e = fq[warp][(fh + lane) & 63];
                    const int ix = (int)(e & 1023u), iy = (int)((e >> 10) & 1023u), iz = (int)((e >> 20) & 1023u);
                    const long long cell = a.cell0[l] + ((long long)ix * a.m[l] + iy) * a.m[l] + iz;
                    const double y[3] = {xd[0] - hg_centre(&a, l, ix), xd[1] - hg_centre(&a, l, iy),
                                         xd[2] - hg_centre(&a, l, iz)};
                    const double d = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
                    const double rho = a.rho[l];
                    const double *M = a.blk + cell * a.stride;
                    const double v = 1.0 / d, idr = 1.0 / (d - rho);
                    const double extra = (double)a.cnt[cell] * HG_FIX_SLACK;
                    S += hier_expand_orders(M + a.moff, a.pm, a.mc0, y, v, q);
                    E += hier_trunc(M + 1, a.pm, v, idr, q) + extra * idr;
                    Er += M[a.roff + refined] * v; /* hg_finalize */
                    /* the fixed point's rounding of A and D: extra v */
                    const double phc = hier_phi(M, a.doff, a.phik, y, v, idr, rho, 0.0, 0.0) + extra * v;
                    Phi += phc;
                    Phif += phc;
                    adds += 1.0; /* the lane's running S */
                    if (ix == sl[0] && iy == sl[1] && iz == sl[2]) {
                        S -= skip_z / skip_r;
                        Er += 6.0 * 0x1p-53 * fabs(skip_z) / skip_r; /* a distance within 4.5u, a division */
                        adds += 1.0;
                    }
                }
                fh = (fh + take) & 63;
                nq -= take;
                __syncwarp();
            }
        }
        hg_team_sync(team, bar);
        cur ^= 1;
        ncur = nnext;
    }
    /* near leaves, 32 at a time: lane u reads leaf u's place and count,
     * then the lanes take the group's places one each (found by a binary
     * search over the counts' prefix sums), so the loads of a whole group
     * are in flight together */
    long long nd = 0;
    for (int g0 = 32 * wi; g0 < nnear && !err; g0 += 32 * team) {
        int st = 0, cn = 0;
        if (g0 + lane < nnear) {
            const unsigned c = nearl[g0 + lane];
            st = a.start[c];
            cn = a.count[c];
        }
        int pre = cn; /* inclusive prefix sum over lanes */
        for (int o2 = 1; o2 < 32; o2 <<= 1) {
            const int v = __shfl_up_sync(HG_FULL, pre, o2);
            if (lane >= o2) pre += v;
        }
        const int total = __shfl_sync(HG_FULL, pre, 31);
        /* HG_NEAR_PER places a lane per round, their loads (index, place,
         * radius of each) issued together: the near field's time is these
         * loads' round trips, not arithmetic.  A lane's places come in the
         * same order whatever HG_NEAR_PER is (idx = base + 32 h + lane), so
         * its sums have the same bits */
        for (int base = 0; base < total; base += 32 * HG_NEAR_PER) {
            int sidx[HG_NEAR_PER];
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h) {
                const int idx = base + 32 * h + lane;
                int lo = 0; /* the first lane whose prefix exceeds idx */
                for (int step = 16; step; step >>= 1) {
                    const int pv = __shfl_sync(HG_FULL, pre, lo + step - 1);
                    if (pv <= idx) lo += step;
                }
                const int pu = __shfl_sync(HG_FULL, pre, lo), cu_ = __shfl_sync(HG_FULL, cn, lo),
                          su = __shfl_sync(HG_FULL, st, lo);
                sidx[h] = idx < total ? su + idx - (pu - cu_) : -1;
            }
            int ids[HG_NEAR_PER];
            float4 bs[HG_NEAR_PER];
            float brs[HG_NEAR_PER];
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h) {
                const int s = sidx[h] >= 0 ? sidx[h] : 0;
                ids[h] = sidx[h] >= 0 ? a.pid[s] : -1;
                bs[h] = a.pk[s];
                brs[h] = a.pr[s];
            }
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h)
                if (ids[h] >= 0 && ids[h] != skip) /* packed: the charge in w */
                    hg_near(a, x, sa, bs[h], bs[h].w, brs[h], ids[h], mate_hi, is_t, dbl, Sf, Phid, nd, overlap,
                            degenerate);
        }
    }
    /* particles waiting in the overflow list, when their leaf is near */
    const int nov = *a.novf;
    for (int e = 32 * wi + lane; e < nov && !err; e += 32 * team) {
        const int id = a.ovf[e];
        if (id < 0 || id == skip) continue;
        const unsigned lf = (unsigned)a.leafof[id];
        int in = 0;
        for (int u = 0; u < nnear && !in; ++u) in = nearl[u] == lf;
        if (!in) continue;
        const float4 b = a.pos[id];
        const float4 sb = a.prm.sp[coulomb_hs_species(b.w)];
        hg_near(a, x, sa, b, sb.x, sb.y, id, mate_hi, is_t, dbl, Sf, Phid, nd, overlap, degenerate);
    }
    S = hg_wsum(S);
    E = hg_wsum(E);
    Er = hg_wsum(Er);
    Phi = hg_wsum(Phi);
    Phif = hg_wsum(Phif);
    /* a term's roundings: its lane's running sums, the warp's five
     * levels and the team's sum (at most HG_TEAM_MAX - 1 additions): at
     * most the count of all terms plus 8 + HG_TEAM_MAX (added by every
     * warp of a team, so a team counts it team times: looser, not wrong) */
    adds = hg_wsum(adds + (double)nd) + (8.0 + HG_TEAM_MAX);
    Sf = hg_wsum(Sf);
    Phid = hg_wsum(Phid);
    overlap = __any_sync(HG_FULL, overlap);
    degenerate = __any_sync(HG_FULL, degenerate);
    err = __any_sync(HG_FULL, err);
    if (team > 1) { /* the warps' sums in order */
        if (lane == 0) {
            const double v[8] = {S, E, Phi, Phif, adds, Sf, Phid, Er};
            for (int i = 0; i < 8; ++i) tsum[warp][i] = v[i];
            tflag[warp][0] = overlap;
            tflag[warp][1] = degenerate;
            tflag[warp][2] = err;
        }
        hg_team_sync(team, bar);
        if (wi != 0) return;
        S = E = Phi = Phif = adds = Sf = Phid = Er = 0.0;
        for (int w = 0; w < team; ++w) {
            S += tsum[warp + w][0];
            E += tsum[warp + w][1];
            Phi += tsum[warp + w][2];
            Phif += tsum[warp + w][3];
            adds += tsum[warp + w][4];
            Sf += tsum[warp + w][5];
            Phid += tsum[warp + w][6];
            Er += tsum[warp + w][7];
            overlap |= tflag[warp + w][0];
            degenerate |= tflag[warp + w][1];
            err |= tflag[warp + w][2];
        }
    }
    if (lane == 0) {
        hg_point r;
        r.Sf = Sf;
        r.S = S;
        r.E = E;
        r.Er = Er;
        /* each near |z|/r from the float 1/r (within 1.5 ulp): widened 1e-6 */
        r.Phi = Phi + Phid * (1.0 + 1e-6);
        r.Phif = Phif;
        r.Phid = Phid * (1.0 + 1e-6);
        r.exact_near = dbl;
        r.adds = adds;
        r.overlap = overlap;
        r.degenerate = degenerate;
        a.pts[out] = r;
        if (err) a.status->err = 1;
    }
}

extern "C" __global__ void __launch_bounds__(32 * HG_TEAM_MAX, 1) hg_enclose(hg_args a, int mode)
{
    hg_enclose_body(a, mode, 0);
}

/* The refined look in blocks of HG_TEAM_NARROW warps at 80 registers a
 * thread (spilling), three blocks an SM: for the batches whose points are
 * more than hg_enclose's blocks hold in teams of HG_TEAM_NARROW (its
 * teams of 4 took 183 µs a batch at 2^20, these teams of 8 ~165: bench/NOTES.md) */
extern "C" __global__ void __launch_bounds__(32 * HG_TEAM_NARROW, 3) hg_enclose_narrow(hg_args a)
{
    hg_enclose_body(a, HG_WALK_REFINE, 1);
}

/* One block of HG_TSUM threads: the total energy's share of the chunk of
 * whole walks (points 0 ... S-1, particles b0 ...): ½ Σ_p U_p with U_p =
 * Sf + λz S (the particle's pair energies with all others), added to
 * tot[0] in a fixed order, the bound on its distance from the direct sum
 * of the float pair energies (DESIGN.md, "The energy") to tot[1], and
 * the points that met an overlap or a coincidence to tot[2]. */
extern "C" __global__ void __launch_bounds__(HG_TSUM) hg_total_sum(hg_args a)
{
    __shared__ double sh[3][HG_TSUM];
    double u = 0.0, b = 0.0, bad = 0.0;
    for (int p = threadIdx.x; p < a.S; p += HG_TSUM) {
        const hg_point r = a.pts[p];
        const double lz = (double)a.prm.sp[coulomb_hs_species(a.pos[a.b0 + p].w)].z;
        u += r.Sf + lz * r.S;
        b += hier_total_bound(fabs(lz), r.E + hier_own_bound(r.Er, r.adds, r.Phi, r.E), r.Phi, a.ksum);
        bad += (double)(r.overlap || r.degenerate);
    }
    sh[0][threadIdx.x] = u;
    sh[1][threadIdx.x] = b;
    sh[2][threadIdx.x] = bad;
    for (int w = HG_TSUM / 2; w; w >>= 1) {
        __syncthreads();
        if (threadIdx.x < w)
            for (int c = 0; c < 3; ++c) sh[c][threadIdx.x] += sh[c][threadIdx.x + w];
    }
    if (threadIdx.x == 0) {
        a.tot[0] += 0.5 * sh[0][0];
        a.tot[1] += 0.5 * sh[1][0];
        a.tot[2] += sh[2][0];
    }
}
