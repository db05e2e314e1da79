/* test_coulomb_hs — the coulomb_hs host table, called directly through a
 * fake host (no core): the Bjerrum length, species and cell from the
 * config, energies computed by hand, delta() against total(), the initial
 * placement (overlap-free, inside, neutral, a million ions in seconds) and
 * the clean failures. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#include "../lj_fene/fake_host.h"

#include "coulomb_hs.h"

/* the plugin under test is linked in */
const metro_plugin *metro_plugin_entry(void);

/* ---- a fake host with REAL_LIST parameters ------------------------------- */

static const double *fake_list(const metro_params *p, const char *name, int *n)
{
    static double store[8][64];
    static int turn;
    double *out = store[turn++ & 7];
    const char *t = fake_text(p, name);
    int k = 0;
    while (*t && k < 64) {
        char *end;
        double x = strtod(t, &end);
        if (end == t) break;
        out[k++] = x;
        t = end;
        while (*t == ',' || *t == ' ') ++t;
    }
    *n = k;
    return out;
}

static metro_host_api host;
static metro_ctx ctx;
static const metro_plugin *plug;
static const metro_potential_api *api;

static void setup_host(void)
{
    host = fake_host;
    host.param_list = fake_list;
    memset(&ctx, 0, sizeof ctx);
    ctx.rng = 0x9E3779B97F4A7C15ull;
    plug = metro_plugin_entry();
    api = plug->api;
}

/* The species along the index as the core assigns them before initial()
 * (metro_species_interleave); initial() places particles of the species
 * it finds in w. */
static void core_species(metro_float4 *p, int n, const metro_setup *s)
{
    long count[METRO_MAX_SPECIES];
    for (int k = 0; k < s->species; ++k) count[k] = s->species_table[k].count;
    metro_species_interleave(p, n, count, s->species);
}

/* Create an instance for `particles` from key=value strings; NULL (message
 * in ctx.msg) when refused. */
static void *make(int particles, metro_setup *setup, const char *const *kv, int n)
{
    memset(setup, 0, sizeof *setup);
    setup->particles = particles;
    setup->replicas = 1;
    setup->backend = METRO_BACKEND_CPU;
    metro_params p = fake_params(plug->params, kv, n);
    void *self = NULL;
    ctx.msg[0] = '\0';
    if (api->create(&host, &ctx, &p, setup, &self)) return NULL;
    return self;
}

/* ---- Bjerrum length, species, cell --------------------------------------- */

START_TEST(bjerrum_from_temperature)
{
    setup_host();
    metro_setup s;
    const char *kv[] = {"valences=1,-1", "diameters=4", "cell_radius=50"};
    void *c = make(10, &s, kv, 3);
    ck_assert_ptr_nonnull(c);
    /* SI: e^2/(4 pi eps0 78.3 k_B 300 K) = 7.11371 Å; the paper says 7.117 */
    ck_assert_double_eq_tol(fake_fact_of("bjerrum"), 7.11371, 2e-5);
    ck_assert_double_le(fabs(fake_fact_of("bjerrum") / 7.117 - 1.0), 6e-4);
    ck_assert_int_eq(s.species, 2);
    ck_assert_int_eq(s.species_table[0].count, 5);
    ck_assert_int_eq(s.species_table[1].count, 5);
    ck_assert_double_eq(fake_fact_of("cell_radius"), 50.0);
    api->destroy(c);

    /* λ_B ∝ 1/(eps_r T) */
    const char *kv2[] = {"valences=1,-1", "diameters=4", "cell_radius=50", "temperature=600", "epsilon_r=39.15"};
    c = make(10, &s, kv2, 5);
    ck_assert_double_eq_tol(fake_fact_of("bjerrum"), 7.11371, 2e-5);
    api->destroy(c);
    /* a given bjerrum with a temperature or epsilon_r that it would ignore
     * is refused (temperature = 1 was dropped without a word); at their
     * defaults, as a resumed run's config.ini writes them, they pass */
    const char *kv3[] = {"valences=1,-1", "diameters=4", "cell_radius=50", "bjerrum=7.117", "temperature=1"};
    ck_assert_ptr_null(make(10, &s, kv3, 5));
    ck_assert_str_eq(ctx.msg, "bjerrum: give bjerrum or temperature/epsilon_r, not both (temperature = 1 is given too, "
                              "and bjerrum = 7.117 would ignore it)");
    const char *kv4[] = {"valences=1,-1", "diameters=4", "cell_radius=50", "bjerrum=7.117", "epsilon_r=2"};
    ck_assert_ptr_null(make(10, &s, kv4, 5));
    ck_assert_msg(strstr(ctx.msg, "bjerrum: give bjerrum or temperature/epsilon_r, not both (epsilon_r = 2 ") != NULL,
                  "%s", ctx.msg);
    const char *kv5[] = {"valences=1,-1", "diameters=4", "cell_radius=50", "bjerrum=7.117", "temperature=300",
                         "epsilon_r=78.3"};
    c = make(10, &s, kv5, 6);
    ck_assert_ptr_nonnull(c);
    ck_assert_double_eq(fake_fact_of("bjerrum"), 7.117);
    api->destroy(c);
}
END_TEST

START_TEST(concentration_sets_the_cell)
{
    setup_host();
    metro_setup s;
    /* PHYSICS.md §2: cation density 1.1447e-6 Å^-3; 4096 ions of a 3:-1 salt
     * fill a sphere of radius 598 Å */
    char conc[64];
    snprintf(conc, sizeof conc, "concentration=%.10g", 1.1447e-6 / (6.02214076e23 * 1e-27));
    const char *kv[] = {"valences=3,-1", "diameters=7.5", conc, "names=cation,anion"};
    void *c = make(4096, &s, kv, 4);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(s.species_table[0].count, 1024);
    ck_assert_int_eq(s.species_table[1].count, 3072);
    ck_assert_double_eq_tol(fake_fact_of("cell_radius"), 598.0, 0.5);
    ck_assert_str_eq(s.species_table[0].name, "cation");
    ck_assert_str_eq(s.species_table[1].name, "anion");
    ck_assert_double_eq(s.species_table[0].charge, 3.0);
    ck_assert_double_eq(s.species_table[1].diameter, 7.5);
    api->destroy(c);
}
END_TEST

START_TEST(bad_configs_are_refused)
{
    setup_host();
    metro_setup s;
    struct {
        int n;
        const char *kv[4];
        const char *says;
    } bad[] = {
        {10, {"valences=1,-1", "diameters=4", "cell_radius=50", "counts=6,4"}, "electroneutral"},
        {10, {"valences=1,-1", "diameters=4", "cell_radius=50", "counts=3,3"}, "sum to 6"},
        {10, {"valences=2,-1", "diameters=4", "cell_radius=50", NULL}, "electroneutral mix"},
        {10, {"valences=1,-1", "diameters=4", "cell_radius=50", "concentration=0.1"}, "not both"},
        {10, {"valences=1,-1", "diameters=4", NULL, NULL}, "cell_radius"},
        {10, {"valences=1,-1,2", "diameters=4,4", "cell_radius=50", NULL}, "diameters"},
        {10, {"valences=1,-1", "diameters=200", "cell_radius=50", NULL}, "no room"},
        /* point charges fell into each other (E = -174 for 8 ions, frozen) */
        {8, {"valences=1,-1", "diameters=0", "cell_radius=50", NULL},
         "diameters: species 'z+1' carries charge 1 but has no hard core: give it a diameter > 0 (point charges of "
         "opposite sign fall into each other)"},
        {8, {"valences=1,-1", "diameters=4,0", "cell_radius=50", "names=na,cl"},
         "diameters: species 'cl' carries charge -1 but has no hard core"},
        /* more sphere volume than cell (a dry run passed it) */
        {10, {"valences=1,-1", "diameters=4", "cell_radius=3", NULL},
         "cell_radius: the ions' hard spheres would fill 2.96 times the cell's volume"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        int n = 0;
        while (n < 4 && bad[i].kv[n]) ++n;
        void *c = make(bad[i].n, &s, bad[i].kv, n);
        ck_assert_msg(c == NULL, "case %zu accepted", i);
        ck_assert_msg(strstr(ctx.msg, bad[i].says) != NULL, "case %zu: '%s' lacks '%s'", i, ctx.msg, bad[i].says);
    }
    /* a neutral species may be a point */
    const char *neutral[] = {"valences=0", "diameters=0", "cell_radius=50"};
    void *c = make(8, &s, neutral, 3);
    ck_assert_msg(c != NULL, "%s", ctx.msg);
    api->destroy(c);
}
END_TEST

/* ---- energies ------------------------------------------------------------ */

START_TEST(energies_by_hand)
{
    setup_host();
    metro_setup s;
    const char *kv[] = {"valences=3,-1", "diameters=4,2", "cell_radius=20", "bjerrum=7", "counts=1,3"};
    void *c = make(4, &s, kv, 5);
    ck_assert_ptr_nonnull(c);
    /* a cation at the origin, anions at 10 Å on x, 5 Å on y, 8 Å on z */
    metro_float4 p[4] = {{0, 0, 0, 0}, {10, 0, 0, 1}, {0, 5, 0, 1}, {0, 0, -8, 1}};
    double e01 = 7.0 * 3 * -1 / 10.0, e02 = 7.0 * 3 * -1 / 5.0, e03 = 7.0 * 3 * -1 / 8.0;
    double e12 = 7.0 / sqrt(125.0), e13 = 7.0 / sqrt(164.0), e23 = 7.0 / sqrt(89.0);
    double want = e01 + e02 + e03 + e12 + e13 + e23;
    ck_assert_double_eq_tol(api->total(c, p, 4), want, 1e-5);

    /* move anion 1 to (2.9, 0, 0): contact distance (4 + 2)/2 = 3 -> overlap */
    ck_assert(isinf(api->delta(c, p, 4, 1, metro_f4(2.9f, 0, 0, 1))));
    /* to (3.1, 0, 0): allowed, change by hand */
    double d = api->delta(c, p, 4, 1, metro_f4(3.1f, 0, 0, 1));
    double want_d = 7.0 * -3 / 3.1 - e01 + 7.0 / sqrt(3.1 * 3.1 + 25) - e12 + 7.0 / sqrt(3.1 * 3.1 + 64) - e13;
    ck_assert_double_eq_tol(d, want_d, 1e-5);
    /* the wall: an anion centre may reach 20 - 1 = 19 Å, a cation 18 Å */
    ck_assert(isfinite(api->delta(c, p, 4, 1, metro_f4(18.99f, 0, 0, 1))));
    ck_assert(isinf(api->delta(c, p, 4, 1, metro_f4(19.01f, 0, 0, 1))));
    ck_assert(isfinite(api->delta(c, p, 4, 0, metro_f4(0, 0, 17.99f, 0))));
    ck_assert(isinf(api->delta(c, p, 4, 0, metro_f4(0, 0, 18.01f, 0))));
    api->destroy(c);
}
END_TEST

START_TEST(delta_equals_total_difference)
{
    setup_host();
    metro_setup s;
    const char *kv[] = {"valences=3,-1", "diameters=7.5", "cell_radius=60", "bjerrum=7.117"};
    const int n = 300;
    void *c = make(n, &s, kv, 4);
    ck_assert_ptr_nonnull(c);
    metro_float4 *p = calloc(n, sizeof *p);
    core_species(p, n, &s);
    ck_assert_int_eq(api->initial(c, &ctx, p, n), 0);
    double e = api->total(c, p, n);
    ck_assert(isfinite(e));
    int finite = 0, infinite = 0;
    float u[4];
    for (int t = 0; t < 400; ++t) {
        fake_uniform(&ctx, u, 4);
        int i = (int)(u[0] * n) % n;
        metro_float4 q = metro_f4(p[i].x + (u[1] - 0.5f) * 30, p[i].y + (u[2] - 0.5f) * 30,
                                  p[i].z + (u[3] - 0.5f) * 30, p[i].w);
        double d = api->delta(c, p, n, i, q);
        if (!isfinite(d)) {
            ck_assert(d > 0); /* +inf, never NaN */
            ++infinite;
            continue;
        }
        metro_float4 old = p[i];
        p[i] = q;
        double e2 = api->total(c, p, n);
        ck_assert_msg(fabs((e2 - e) - d) < 1e-9 * fmax(1.0, fabs(e)), "trial %d: delta %.12g, totals differ by %.12g",
                      t, d, e2 - e);
        ++finite;
        if (t & 1) p[i] = old; else e = e2;
    }
    ck_assert_int_gt(finite, 50);
    ck_assert_int_gt(infinite, 10);
    free(p);
    api->destroy(c);
}
END_TEST

/* The run form the GPU samplers sum with (metro_pair_delta_begin/add/end)
 * against the pair-deltas one by one: equal up to float rounding, and
 * +INFINITY as soon as one partner overlaps the trial. */
START_TEST(pair_delta_runs_equal_the_sums)
{
    coulomb_hs_params P;
    memset(&P, 0, sizeof P);
    const float z[2] = {3, -1}, d[2] = {7.5f, 4}, lb = 7.117f, R = 60;
    for (int k = 0; k < 2; ++k) P.sp[k] = metro_f4(z[k], d[k] / 2, lb * z[k], (R - d[k] / 2) * (R - d[k] / 2));
    P.nspecies = 2;
    P.bjerrum = lb;
    P.cell_radius = R;
    srand(7);
#define U01 ((float)rand() / (float)RAND_MAX)
    int overlaps = 0;
    for (int t = 0; t < 2000; ++t) {
        metro_float4 o = metro_f4(40 * U01 - 20, 40 * U01 - 20, 40 * U01 - 20, (float)(t & 1));
        metro_float4 tr = metro_f4(o.x + 6 * U01 - 3, o.y + 6 * U01 - 3, o.z + 6 * U01 - 3, o.w);
        metro_pd_sum run = coulomb_hs_sum_begin(&P, tr, o);
        double want = 0.0, scale = 0.0;
        int hit = 0;
        for (int j = 0; j < 32; ++j) {
            metro_float4 b;
            do { /* partners never overlap the old position */
                b = metro_f4(40 * U01 - 20, 40 * U01 - 20, 40 * U01 - 20, (float)(rand() & 1));
            } while (metro_dist2(o, b) < 36.0f);
            float pd = coulomb_hs_pair_delta(&P, tr, o, b);
            hit |= isinf(pd);
            want += pd;
            scale += fabs(coulomb_hs_pair(&P, o, b));
            coulomb_hs_sum_add(&P, &run, b);
        }
        float got = coulomb_hs_sum_end(&run);
        if (hit) {
            ck_assert_msg(isinf(got) && got > 0, "trial %d: an overlapping run gives %g", t, got);
            ++overlaps;
        } else {
            ck_assert_msg(fabs(got - want) <= 1e-5 * scale, "trial %d: run %.9g, sum %.9g (scale %g)", t, got, want,
                          scale);
        }
    }
#undef U01
    ck_assert_int_gt(overlaps, 20);
    ck_assert_int_lt(overlaps, 1980);
}
END_TEST

/* ---- placement ----------------------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Check a placement: every centre in its ball, no two hard cores overlap
 * (a sorted cell list of cells of width >= dmax, independent of the
 * plugin's grid), counts per species, and every prefix of the index within
 * `qmax` of neutral.  Returns the number of problems found. */
static int check_placement(const metro_float4 *p, int n, const metro_setup *s, double dmax, double qmax)
{
    int bad = 0;
    long cnt[METRO_MAX_SPECIES] = {0};
    double q = 0.0, worst = 0.0;
    for (int i = 0; i < n; ++i) {
        int sp = (int)p[i].w;
        cnt[sp]++;
        double r = sqrt((double)p[i].x * p[i].x + (double)p[i].y * p[i].y + (double)p[i].z * p[i].z);
        if (r > fake_fact_of("cell_radius") - s->species_table[sp].diameter / 2 + 1e-3) ++bad;
        q += s->species_table[sp].charge;
        worst = fmax(worst, fabs(q));
    }
    for (int sp = 0; sp < s->species; ++sp)
        if (cnt[sp] != s->species_table[sp].count) ++bad;
    if (fabs(q) > 1e-9 || worst > qmax) ++bad;

    double R = fake_fact_of("cell_radius"), w = fmax(dmax, 2 * R / 256);
    long m = (long)ceil(2 * R / w) + 1;
    long long *key = malloc((size_t)n * sizeof *key);
    for (int i = 0; i < n; ++i) {
        long cx = (long)((p[i].x + R) / w), cy = (long)((p[i].y + R) / w), cz = (long)((p[i].z + R) / w);
        key[i] = (((long long)cx * m + cy) * m + cz) * (1LL << 21) + i;
    }
    qsort(key, (size_t)n, sizeof *key, cmp_key);
    for (int a = 0; a < n; ++a) {
        int i = (int)(key[a] & ((1 << 21) - 1));
        long cx = (long)((p[i].x + R) / w), cy = (long)((p[i].y + R) / w), cz = (long)((p[i].z + R) / w);
        for (long dx = -1; dx <= 1; ++dx)
            for (long dy = -1; dy <= 1; ++dy)
                for (long dz = -1; dz <= 1; ++dz) {
                    long long c = ((cx + dx) * m + cy + dy) * m + cz + dz;
                    long long lo = c * (1LL << 21);
                    /* first key >= lo by bisection */
                    int l = 0, h = n;
                    while (l < h) {
                        int mid = (l + h) / 2;
                        if (key[mid] < lo) l = mid + 1; else h = mid;
                    }
                    for (int b = l; b < n && key[b] < lo + (1LL << 21); ++b) {
                        int j = (int)(key[b] & ((1 << 21) - 1));
                        if (j <= i) continue;
                        double ddx = p[i].x - p[j].x, ddy = p[i].y - p[j].y, ddz = p[i].z - p[j].z;
                        double dmin = (s->species_table[(int)p[i].w].diameter + s->species_table[(int)p[j].w].diameter) / 2;
                        if (ddx * ddx + ddy * ddy + ddz * ddz < dmin * dmin * (1 - 1e-6)) ++bad;
                    }
                }
    }
    free(key);
    return bad;
}

START_TEST(placement_is_valid)
{
    setup_host();
    metro_setup s;
    /* fairly dense (volume fraction 0.2): the grid really has to work */
    const char *kv[] = {"valences=2,-1", "diameters=4,3", "cell_radius=90", "bjerrum=7.117"};
    const int n = 30000;
    void *c = make(n, &s, kv, 4);
    ck_assert_ptr_nonnull(c);
    metro_float4 *p = calloc(n, sizeof *p);
    core_species(p, n, &s);
    ck_assert_int_eq(api->initial(c, &ctx, p, n), 0);
    ck_assert_int_eq(check_placement(p, n, &s, 4.0, 3.0), 0);
    ck_assert(isfinite(api->total(c, p, 2000))); /* a prefix: the full total is slow */
    /* the checker can fail: push one ion onto another */
    p[17] = metro_f4(p[18].x + 1.0f, p[18].y, p[18].z, p[17].w);
    ck_assert_int_gt(check_placement(p, n, &s, 4.0, 3.0), 0);
    free(p);
    api->destroy(c);
}
END_TEST

START_TEST(million_ions_place_in_seconds)
{
    setup_host();
    metro_setup s;
    char conc[64];
    snprintf(conc, sizeof conc, "concentration=%.10g", 1.1447e-6 / (6.02214076e23 * 1e-27));
    const char *kv[] = {"valences=3,-1", "diameters=7.5", conc, "bjerrum=7.117"};
    const int n = 1048576;
    void *c = make(n, &s, kv, 4);
    ck_assert_ptr_nonnull(c);
    ck_assert_double_eq_tol(fake_fact_of("cell_radius"), 3795.0, 1.0); /* PHYSICS.md §2 */
    metro_float4 *p = calloc(n, sizeof *p);
    core_species(p, n, &s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(api->initial(c, &ctx, p, n), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("placed %d ions in %.2f s\n", n, sec);
    ck_assert_double_lt(sec, 20.0);
    ck_assert_int_eq(check_placement(p, n, &s, 7.5, 4.0), 0);
    free(p);
    api->destroy(c);
}
END_TEST

START_TEST(too_dense_fails_cleanly)
{
    setup_host();
    metro_setup s;
    /* 2000 spheres of diameter 10 in a cell of radius 70: volume fraction
     * 0.73, which a packing could hold but random placement cannot (above
     * 1, create() refuses: bad_configs_are_refused) */
    const char *kv[] = {"valences=1,-1", "diameters=10", "cell_radius=70", "max_attempts=200"};
    const int n = 2000;
    void *c = make(n, &s, kv, 4);
    ck_assert_ptr_nonnull(c);
    metro_float4 *p = calloc(n, sizeof *p);
    core_species(p, n, &s);
    ck_assert_int_ne(api->initial(c, &ctx, p, n), 0);
    ck_assert_msg(strstr(ctx.msg, "cannot place ion") && strstr(ctx.msg, "too dense"), "%s", ctx.msg);
    free(p);
    api->destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coulomb_hs");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, bjerrum_from_temperature);
    tcase_add_test(tc, concentration_sets_the_cell);
    tcase_add_test(tc, bad_configs_are_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("energy");
    tcase_add_test(tc, energies_by_hand);
    tcase_add_test(tc, delta_equals_total_difference);
    tcase_add_test(tc, pair_delta_runs_equal_the_sums);
    suite_add_tcase(s, tc);
    tc = tcase_create("placement");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, placement_is_valid);
    tcase_add_test(tc, million_ions_place_in_seconds);
    tcase_add_test(tc, too_dense_fails_cleanly);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
