/* hier_gpu.h — what the CUDA path of the hierarchical sampler shares
 * between its kernels (hierarchical.cu) and its host code (hier_gpu.c).
 * DESIGN.md in this folder, "The GPU path", has the argument; this header
 * only says what each piece is.
 *
 * A batch is S consecutive particles [b0, b0 + S) (S <= HG_MAX_BATCH).
 * Its trials are enclosed in parallel against the tree as it stands at the
 * batch's start (every particle at its position then, the batch's own
 * "mates" included), the exact float terms between mates (old and trial
 * positions) are formed in parallel, and one block then decides the
 * batch's moves in index order, adding for each accepted mate its exact
 * change to the later mates' sums.  An undecided move gets its exact pass
 * (every partner's float terms) inside the chain's launch, from helper
 * blocks that wait for it on the other SMs; what even that leaves open
 * stops the chain for the host's reference, and the chain then resumes.
 * Then the accepted moves update the tree, and beside that update, on a
 * second stream, a later batch's trials and mates' terms are formed
 * (hier_gpu.c, batch_trials).  Batches overlap (hier_gpu.c, `lead`): the
 * next batch is enclosed against the tree before this batch's moves, with
 * this batch's trials among its mates, so this batch's chain runs beside
 * the previous batch's update and the next batch's looks, its deciding
 * block alone, its exact passes at stops; before the next chain, hg_fold
 * adds this batch's accepted moves to the next batch's sums.
 *
 * The tree is hier_tree's: levels 1 ... L-1 keep per cell the moments,
 * here accumulated in 64-bit fixed point (exact to add and to remove, so
 * no drift and no dependence on the order of the atomics) and converted
 * into the double block hier_tree.c evaluates (its layout, but for the
 * moments, order by order here: hier_mslot; the same norms);
 * the leaves are packed in Morton order with room to spare, each leaf's
 * particles sorted by index at every repack.
 */
#ifndef HIER_GPU_H
#define HIER_GPU_H

#include "metro/hd.h"

#include "coulomb_hs.h"
#include "hier_math.h"
#include "hier_tree.h"

/* Trials per batch: one thread each in the decision chain's block. */
#define HG_MAX_BATCH 1024
/* Per point: the cells of a level the walk keeps open, and near leaves */
#define HG_FRONT 4096
#define HG_NEAR 4096
/* Far cells and leaves are found by a warp; blocks of HG_WARPS warps */
#define HG_WARPS 4
/* warps walking one point together in the refined look (hg_enclose's
 * team): HG_TEAM by default (16: refined looks -12% at 2^23 against 8,
 * within 1% at 2^20, 2026-11-27), METRO_HIER_REFINE_WARPS=W (1 ...
 * HG_TEAM_MAX) for comparisons */
#define HG_TEAM 16
#define HG_TEAM_MAX 16
/* the refined look's narrow blocks (hg_enclose_narrow): warps a block */
#define HG_TEAM_NARROW 8
/* A walk's near partners: places a lane loads at once (8: walks -12% to
 * -15% at 2^20 and 2^23 against 2, 2026-11-27; what nvJitLink's link of
 * hg_enclose spills, 28 bytes, lies outside the near field's loop) */
#define HG_NEAR_PER 8
/* Fixed point of the moments: a value v is kept as round(v * 2^38 / u),
 * u its unit (|z| rho^n per degree, normalised: hier_gpu.c), so a cell's
 * sums stay below 2^62 while Σ|z| < 2^24.  Each particle's rounding is at
 * most 2^-39 u per coefficient, at most 8 times that in a norm G_n (2n + 1
 * <= 58 terms); the bounds allow HG_FIX_SLACK = 2^-35 u per particle. */
#define HG_FIX_BITS 38
#define HG_FIX_SLACK 0x1p-35
/* Blocks of the exact pass after a stop (their partial sums are added in
 * order) */
#define HG_EXACT_BLOCKS 264
/* The exact pass inside the chain (hier_dev_chain.h, hg_xpass): the
 * particles in at most HG_XCHUNKS chunks of a multiple of 128 (at least
 * 256), each summed by one warp in a fixed order; the chunks handed out
 * in HG_XCTR groups, each by its own counter (one per lane of the
 * deciding warp) so that the claims do not queue on one address; the
 * deciding warp claims chunks itself once no chunk has finished for
 * HG_XWAIT clock cycles (no helper running: a small GPU, a serialising
 * tool; a helper's chunk takes ~30 µs at 2^23) */
#define HG_XCHUNKS 4096
#define HG_XCTR 32
#define HG_XWAIT 400000
/* The leaves are packed afresh this many times a cycle (at its start and
 * after every n / (HG_REPACKS S) batches): between packings a moving
 * particle leaves a hole and is appended to its new leaf, or, where that
 * is full, to the overflow list that every walk scans, so the walks slow
 * down as a cycle goes on */
#define HG_REPACKS 8
/* What a walk (hg_enclose) encloses */
#define HG_WALK_FIRST 0
#define HG_WALK_REFINE 1
#define HG_WALK_WHOLE 2

/* The refined look's opening parameter, in theta: HIER_THETA_REFINE (the
 * CPU's first refinement) under reference = float, whose floor a closer
 * look cannot lower; closer under reference = exact, which has no floor
 * to stop it (2^22 on the H100: 0.85 left 17,569 exact passes in 2 cycles,
 * 0.6 left 252, in the same time; 0.45 was 19% slower).  0.7 since the
 * exact pass costs less than it did then: 2^20, 2 cycles, 0.7 against 0.6
 * 104 exact passes instead of 18 and 0.16 s fewer of refined looks; 2^23,
 * a quarter cycle, 209 instead of 36 and 0.15 s fewer (bench/NOTES.md) */
#define HG_THETA_REFINE_EXACT 0.7
/* The trials that get the refined look: those within this many of their
 * accepted mates' plausible shift (hg_prep).  2, was 3: 2^20, 2 cycles,
 * order 8, 0.09 s fewer of refined looks for about 100 more exact passes
 * under either reference (moving 1.41 -> 1.32 s with the float one) */
#define HG_CLOSE_SIGMAS 2.0
/* Threads of the total energy's chunk sums (hg_total_sum), a power of two */
#define HG_TSUM 256
/* Partner chunks of the mates' terms (hg_tri) */
#define HG_TRI_CHUNK 32

/* The table of factors (hier_tree.c, build_tables), one array:
 * ic1[n], then ic2, rc1, rc2, gw each [n][m] with row HIER_MAX_DEG + 1,
 * then the rounding factors ev, src, sq per degree (hier_round_factors) */
#define HG_TD HIER_TD
#define HG_T_IC1 0
#define HG_T_IC2 (HG_TD)
#define HG_T_RC1 (HG_TD + HG_TD * HG_TD)
#define HG_T_RC2 (HG_TD + 2 * HG_TD * HG_TD)
#define HG_T_GW (HG_TD + 3 * HG_TD * HG_TD)
#define HG_T_EV (HG_TD + 4 * HG_TD * HG_TD)
#define HG_T_SRC (2 * HG_TD + 4 * HG_TD * HG_TD)
#define HG_T_SQ (3 * HG_TD + 4 * HG_TD * HG_TD)
#define HG_T_SIZE (4 * HG_TD + 4 * HG_TD * HG_TD)

/* One point's enclosure (hier_result's fields, as doubles) */
typedef struct hg_point {
    double Sf, S, E, Phi, Phif, Phid, adds; /* Phid: the directly summed partners' part of Phi */
    double Er;               /* the far cells' own rounding (hier_round); adds: the most roundings
                                between a term and its sum (hier_own_bound) */
    int overlap, degenerate; /* against particles outside the batch */
    int exact_near;          /* Sf from terms in double (reference = exact's refined look) */
} hg_point;

/* Per trial of the batch, what the chain reads (hg_prep) */
typedef struct hg_trial {
    double est, eps, T, dT; /* enclosure centre and half width, -ln u and its tie margin */
    double absA;            /* Σ|terms| of the mates (hg_tri) */
    int blocked;            /* wall or hard core outside the batch: rejected */
    int degenerate;         /* a distance 0: left to the reference */
    int nA;                 /* mates whose old position the trial overlaps */
    int wide;               /* the enclosure is too coarse for the running energy (hier_energy_wide):
                               accepted only by an exact pass */
    /* over the mates before it in its chunk of 32 (the chain's, hg_decide):
     * the sums of their negative and positive changes and of their sizes,
     * and their overlap flags (bit j & 31: flg 1, flg 2) */
    double lo, hi, sab;
    unsigned fa, fb;
} hg_trial;

/* What the chain leaves for the host after each launch */
typedef struct hg_status {
    int stop;        /* first undecided trial of the batch, or S when done */
    int accepted;    /* acceptances of the batch so far */
    int decided[3];  /* by the enclosure, the chain's exact pass, a stop's exact pass */
    int preset;      /* -1, or the decision (0/1) of trial `stop` made outside the chain */
    double preset_de;
    double exact_sum, exact_abs;
    int exact_bad;   /* the exact pass met a distance 0 or an overlap */
    /* (the host writes back preset ... exact_bad after a stop, nothing
     * else: the looks of the next batch may be writing what follows) */
    int err;         /* a walk's lists overflowed (HG_FRONT / HG_NEAR) */
    long long refined; /* trials given the refined look, a running total */
    /* METRO_HIER_PROFILE: the deciding block's time inside hg_chain, ns of
     * %globaltimer summed over launches (the chain's phase less this is
     * its launches, its wait for a free SM, hg_fold and the stops) */
    unsigned long long chain_ns;
} hg_status;

/* Everything the kernels read, passed by value */
typedef struct hg_args {
    coulomb_hs_params prm;
    int n, L, pm, ncoef, stride, fstride, roff, moff, doff, boff, goff, phik;
    int p_lo, direct_max;
    int mc0;                        /* the block's order-0 moments, padded to even (hier_mslot) */
    int refine_slots;               /* the refined look's blocks the device holds at once (hg_enclose's teams) */
    int refine_slots_narrow;        /* the same for hg_enclose_narrow */
    int refine_narrow;              /* hg_enclose_narrow: 0 never, 1 for refine_narrow_from < points <=
                                       refine_slots_narrow (teams of HG_TEAM_NARROW where hg_enclose's would
                                       be smaller), 2 always */
    int refine_narrow_from;         /* the points hg_enclose's blocks hold in teams of HG_TEAM_NARROW */
    int profile;                    /* METRO_HIER_PROFILE: hg_chain times its deciding block (chain_ns) */
    int b0, S;                      /* the batch */
    int Sp;                         /* batches overlapping (hier_gpu.c): the previous batch's size, whose
                                     * trials are this batch's mates too (0: none) */
    float step;
    double Rt, theta, dcut, bound_scale, ksum;
    int ideal;                      /* reference = exact (DESIGN.md, "The exact chain") */
    int xhost;                      /* a trial the enclosure leaves open stops the chain for the exact pass
                                     * on the whole device (hg_exact) rather than the chain's helpers: batches
                                     * overlapping, the chain is its deciding block alone (hier_gpu.c) */
    double xpath, spath;            /* reference = exact: the summation heights of the chain's and a stop's exact passes */
    double close_sig;               /* hg_prep's margin for a refined look, in the mates' sigmas */
    double theta_refine;            /* the refined look's opening parameter (HG_THETA_REFINE_EXACT) */
    int m[HIER_MAX_LEVEL + 1];
    double h[HIER_MAX_LEVEL + 1], rho[HIER_MAX_LEVEL + 1];
    long long cell0[HIER_MAX_LEVEL + 1]; /* first cell of level l in the cell arrays */
    const double *tab;              /* HG_T_SIZE factors */
    const double *unit;             /* per level: (pm + 5 + ncoef) units of the fixed point (hier_gpu.c) */
    long long *fx;                  /* per cell: fstride fixed-point sums A, D[3], B[pm+1], M[ncoef] */
    double *blk;                    /* per cell: the evaluated block, hier_tree's layout (stride) but
                                     * its moments order by order (hier_mslot) */
    int *cnt;                       /* per cell: particles */
    /* leaves, Morton order: [start, start + count) packed, count <= cap */
    int *start, *count, *cap;
    float4 *pk;                     /* x, y, z, charge; a hole: far away, charge 0 */
    float *pr;                      /* hard-core radius */
    int *pid;                       /* particle index, -1 for a hole */
    int *slot, *leafof;             /* per particle: packed place (-1: overflow list) and leaf */
    int *ovf, *novf, *ovslot;       /* overflow list (entries -1 when gone), its length, particle's entry */
    int *fill;                      /* per leaf: scratch of the repack */
    metro_float4 *pos;              /* st->d_pos */
    const float4 *rnd;              /* the cycle's uniforms, one float4 per particle */
    double *energy;                 /* st->d_energy */
    metro_float4 *told, *ttri;      /* the batch's old and trial positions */
    metro_float4 *toldp, *ttrip;    /* the previous batch's (Sp > 0) */
    hg_point *pts;                  /* 2 S: trial, old */
    unsigned *front, *nearl;        /* per point: HG_FRONT x 2 and HG_NEAR scratch */
    double *corr;                   /* S x S: the change of mate j's move to k's sum, at [j S + k] */
    unsigned char *flg;             /* S x S: 1 = k's trial overlaps j's old place, 2 = j's trial */
    double *corrx;                  /* Sp x S: as corr, the previous batch's mate i at [i S + k] */
    unsigned char *flgx;            /* Sp x S: as flg */
    double *tabs, *tsq;             /* HG_TRI_CHUNK x S partial Σ|terms| and Σ corr² */
    int *tnA;                       /* HG_TRI_CHUNK x S partial overlap counts */
    hg_trial *tr;                   /* S */
    double *vstate;                 /* S: the chain's sums when it stopped (or the previous batch's moves, hg_fold) */
    int *nstate;                    /* 2 S: its counts */
    int *close;                     /* S: the trial is near its threshold: a refined look (hg_prep) */
    int *clist, *nclist;            /* those trials, in order, and their number */
    double *dE;                     /* S: each accepted move's energy change (two buffers, as acc) */
    unsigned char *acc;             /* S: decisions (two buffers by the batch's parity: batches overlapping,
                                     * the next chain decides while this batch's update reads them) */
    unsigned char *accp;            /* the previous batch's (hg_fold) */
    double *xpart;                  /* 2 HG_EXACT_BLOCKS partial sums of the exact pass */
    int *xbad;                      /* HG_EXACT_BLOCKS */
    /* the chain's exact pass: per counter (group) the job, epoch (20 bits)
     * | trial (12) | next chunk (32); the chunks' and the groups' sums (3
     * each: Σ d, Σ|d|, bad), the chunks done per group, the groups done,
     * the launches' tickets; the chunks' size and number, the chunks per
     * group, the groups */
    unsigned long long *xjob;
    double *xch, *xgrp;
    unsigned *xgdone, *xdone;
    unsigned long long *xticket;
    int xsize, xnch, xper, xng;
    hg_status *status;
    long long *cycle_acc;           /* acceptances of the current cycle */
    double *tot;                    /* 3: the total energy, its bound, points that overlapped (hg_total_sum) */
} hg_args;

#ifndef __CUDACC__
/* Host side (hier_gpu.c) */
typedef struct hier_gpu hier_gpu;
struct hier;
#endif

#endif
