/* test_condensation — the condensation observable:
 *  - fractions of a hand-made configuration (particles at known distances
 *    from two chains, one exactly at the boundary) through
 *    metro_condensation_count;
 *  - the observable's table through a small fake host: two slots at two
 *    temperatures holding swapped replicas, condensation.csv against the
 *    hand counts (species and valence columns), refusals (no chains, no
 *    free particles, no charges, distance 0, free particles all neutral),
 *    save/restore equal to an uninterrupted run;
 *  - a short parallel tempering run of a polyelectrolyte through the core:
 *    a distance below the hard-core contact gives 0 at every temperature,
 *    one beyond the cell's diameter gives 1; the required distance. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "condensation.h"

/* ---- the configuration ---------------------------------------------------- */

/* Species: 0 m (-1, in chains), 1 c (+1), 2 s+ (+1), 3 s- (-1), 4 n (0).
 * Chain 0: particles 0-2 along x at 0, 1, 2; chain 1: particles 3-4 at
 * x = 10, 11.  Free particles 5-12; with distance 1.5 the near ones are
 * marked. */
enum { NP = 13, NS = 5 };
static const metro_species species[NS] = {
    {"m", -1, 0.5, 5}, {"c", 1, 0.5, 4}, {"s+", 1, 0.5, 1}, {"s-", -1, 0.5, 2}, {"n", 0, 0.5, 1}};
static const int first[2] = {0, 3}, length[2] = {3, 2};

static void configuration(metro_float4 *p)
{
    const metro_float4 c[NP] = {
        {0, 0, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0},  /* chain 0 */
        {10, 0, 0, 0}, {11, 0, 0, 0},              /* chain 1 */
        {1, 1.4f, 0, 1},     /* c: 1.4 from particle 1: near */
        {2, 1.5f, 0, 1},     /* c: exactly 1.5 from particle 2: near (<=) */
        {0, 0, -1.75f, 1},   /* c: 1.75 from particle 0: not */
        {5, 0, 0, 1},        /* c: 3 from particle 2: not */
        {11, 0, 1.25f, 2},   /* s+: 1.25 from particle 4: near */
        {10.5f, 1, 1, 3},    /* s-: sqrt(2.25) = 1.5 from both of chain 1: near */
        {6.5f, 0, 0, 3},     /* s-: 3.5 from particle 3: not */
        {-1, 0, 0, 4}};      /* n: 1 from particle 0: near */
    memcpy(p, c, sizeof c);
}

START_TEST(fractions_by_hand)
{
    metro_float4 p[NP];
    configuration(p);
    int free_idx[8];
    for (int k = 0; k < 8; ++k) free_idx[k] = 5 + k;
    long total[NS] = {0}, near[NS] = {0};
    metro_condensation_count(p, free_idx, 8, 2, first, length, 1.5, NS, total, near);
    const long want_total[NS] = {0, 4, 1, 2, 1}, want_near[NS] = {0, 2, 1, 1, 1};
    for (int s = 0; s < NS; ++s) {
        ck_assert_msg(total[s] == want_total[s], "species %d: %ld free, want %ld", s, total[s], want_total[s]);
        ck_assert_msg(near[s] == want_near[s], "species %d: %ld near, want %ld", s, near[s], want_near[s]);
    }
    /* the boundary: just below 1.5 the particle at 1.5 is out */
    memset(near, 0, sizeof near);
    memset(total, 0, sizeof total);
    metro_condensation_count(p, free_idx, 8, 2, first, length, nextafter(1.5, 0), NS, total, near);
    ck_assert_int_eq(near[1], 1);
    ck_assert_int_eq(near[3], 0);
    /* one chain only: the ions near chain 1 are free of chain 0 */
    memset(near, 0, sizeof near);
    metro_condensation_count(p, free_idx, 8, 1, first, length, 1.5, NS, total, near);
    ck_assert_int_eq(near[2], 0);
    ck_assert_int_eq(near[3], 0);
    ck_assert_int_eq(near[1], 2);
}
END_TEST

/* ---- the observable through a fake host ----------------------------------- */

extern const metro_plugin *metro_plugin_entry(void);

struct metro_params {
    const char *kv[16][2];
    int n;
};
struct metro_ctx {
    char msg[1024];
    char dir[512];
    unsigned char *saved;
    size_t nsaved;
};

static const char *text(const metro_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->kv[i][0], name)) return p->kv[i][1];
    for (const metro_param_decl *d = metro_plugin_entry()->params; d->name; d++)
        if (!strcmp(d->name, name)) return d->default_value;
    ck_abort_msg("undeclared parameter %s", name);
    return NULL;
}
static long p_int(const metro_params *p, const char *n) { return atol(text(p, n)); }
static double p_real(const metro_params *p, const char *n) { return atof(text(p, n)); }
static int p_bool(const metro_params *p, const char *n) { return !strcmp(text(p, n), "true"); }
static const char *p_string(const metro_params *p, const char *n) { return text(p, n); }
static int h_fail(metro_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return -1;
}
static void h_log(metro_ctx *c, metro_log_level l, const char *fmt, ...) { (void)c, (void)l, (void)fmt; }
static FILE *h_open(metro_ctx *c, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    return fopen(path, "w");
}
static const char *h_dir(metro_ctx *c) { return c->dir; }
static int h_save(metro_ctx *c, const void *d, size_t n)
{
    c->saved = realloc(c->saved, c->nsaved + n);
    memcpy(c->saved + c->nsaved, d, n);
    c->nsaved += n;
    return 0;
}
static int plotted;
static void h_plot(metro_ctx *c, const char *script) { (void)c, (void)script, ++plotted; }

static const metro_host_api host = {.version = METRO_ABI_VERSION, .fail = h_fail, .log = h_log,
                                    .param_int = p_int, .param_real = p_real, .param_bool = p_bool,
                                    .param_string = p_string, .open_output = h_open, .run_dir = h_dir,
                                    .save_bytes = h_save, .plot = h_plot};

static metro_setup setup_of(int chains)
{
    metro_setup s;
    memset(&s, 0, sizeof s);
    s.particles = NP;
    s.replicas = 2;
    s.backend = METRO_BACKEND_CPU;
    s.species = NS;
    memcpy(s.species_table, species, sizeof species);
    s.topology.chains = chains;
    s.topology.first = first;
    s.topology.length = length;
    s.terms = 2;
    return s;
}

static void new_ctx(metro_ctx *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/metro-cond-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(c->dir));
}

/* Two replicas in two slots: replica 0 the configuration above, replica 1
 * the same with every free particle moved 20 away (none near); slot 0
 * (T = 2) holds replica 1, slot 1 (T = 0.5) replica 0. */
typedef struct two_state {
    metro_state st;
    metro_float4 pos[2 * NP];
    double beta[2], energy[2];
    int slot[2];
} two_state;

static void two_state_init(two_state *s)
{
    memset(s, 0, sizeof *s);
    configuration(s->pos);
    configuration(s->pos + NP);
    for (int i = 5; i < NP; ++i) s->pos[NP + i].y += 20;
    s->st.backend = METRO_BACKEND_CPU;
    s->st.particles = NP;
    s->st.replicas = 2;
    s->st.pos = s->pos;
    s->st.beta = s->beta;
    s->st.energy = s->energy;
    s->st.slot_replica = s->slot;
    s->beta[0] = 0.5;
    s->beta[1] = 2.0;
    s->slot[0] = 1;
    s->slot[1] = 0;
    s->st.measuring = 1;
}

static const metro_observable_api *api(void)
{
    const metro_plugin *d = metro_plugin_entry();
    ck_assert_int_eq(d->kind, METRO_KIND_OBSERVABLE);
    ck_assert_str_eq(d->name, "condensation");
    return d->api;
}

static double col(const char *dir, const char *file, int row, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return metro_test_csv(path, row, name);
}

START_TEST(observable_counts_by_hand)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"distance", "1.5"}, {"per_valence", "true"}}, 2};
    metro_setup s = setup_of(2);
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    ck_assert_msg(a->create(&host, &c, &p, &s, &self) == 0, "%s", c.msg);
    two_state st;
    two_state_init(&st);
    for (int m = 0; m < 5; ++m) ck_assert_msg(a->measure(self, &st.st) == 0, "%s", c.msg);
    plotted = 0;
    ck_assert_msg(a->finish(self, &st.st) == 0, "%s", c.msg);
    ck_assert_int_eq(plotted, 1);
    a->destroy(self);
    char path[1024];
    snprintf(path, sizeof path, "%s/condensation.csv", c.dir);
    char *csv = metro_test_slurp(path);
    ck_assert_ptr_nonnull(csv);
    const char *header = "T,c_fraction,c_fraction_err,s+_fraction,s+_fraction_err,s-_fraction,s-_fraction_err,"
                         "n_fraction,n_fraction_err,z+1_fraction,z+1_fraction_err,z+0_fraction,z+0_fraction_err,"
                         "z-1_fraction,z-1_fraction_err,samples\n";
    ck_assert_msg(!strncmp(csv, header, strlen(header)), "header:\n%s", csv);
    free(csv);
    /* row 0: T = 0.5 (slot 1, replica 0: the hand counts); row 1: T = 2
     * (slot 0, replica 1: nothing near) */
    ck_assert_double_eq(col(c.dir, "condensation.csv", 0, "T"), 0.5);
    ck_assert_double_eq(col(c.dir, "condensation.csv", 1, "T"), 2);
    const char *names[] = {"c", "s+", "s-", "n", "z+1", "z+0", "z-1"};
    const double want[] = {0.5, 1, 0.5, 1, 0.6, 1, 0.5}; /* z+1: c and s+, 3 of 5 */
    for (int q = 0; q < 7; ++q) {
        char f[64], e[64];
        snprintf(f, sizeof f, "%s_fraction", names[q]);
        snprintf(e, sizeof e, "%s_fraction_err", names[q]);
        ck_assert_msg(col(c.dir, "condensation.csv", 0, f) == want[q], "%s = %g, want %g", f,
                      col(c.dir, "condensation.csv", 0, f), want[q]);
        ck_assert_msg(col(c.dir, "condensation.csv", 1, f) == 0, "T = 2 %s = %g", f, col(c.dir, "condensation.csv", 1, f));
        ck_assert_double_eq(col(c.dir, "condensation.csv", 0, e), 0); /* the same configuration 5 times */
    }
    ck_assert_double_eq(col(c.dir, "condensation.csv", 0, "samples"), 5);
    snprintf(path, sizeof path, "%s/condensation.gp", c.dir);
    ck_assert(access(path, R_OK) == 0);
}
END_TEST

static void refused(metro_setup s, const char *distance, const char *want)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"distance", distance}}, 1};
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    int rc = a->create(&host, &c, &p, &s, &self);
    if (!rc) a->destroy(self);
    ck_assert_msg(rc != 0, "accepted (wanted: %s)", want);
    ck_assert_msg(strstr(c.msg, want), "message: %s\n(wanted %s)", c.msg, want);
}

START_TEST(refusals)
{
    refused(setup_of(0), "1.5", "the system has no chains");
    refused(setup_of(2), "0", "distance: 0 is not > 0");
    metro_setup s = setup_of(2);
    s.particles = 5; /* the two chains are everything */
    refused(s, "1.5", "every one of the 5 particles is in a chain");
    s = setup_of(2);
    for (int k = 0; k < NS; ++k) s.species_table[k].charge = 0;
    refused(s, "1.5", "the system has no charged species");
    s = setup_of(2);
    s.species = 0;
    refused(s, "1.5", "the system has no charged species");
    /* the free particles all neutral: known at the first measurement */
    const metro_observable_api *a = api();
    metro_params p = {{{"distance", "1.5"}}, 1};
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    s = setup_of(2);
    ck_assert_int_eq(a->create(&host, &c, &p, &s, &self), 0);
    two_state st;
    two_state_init(&st);
    for (int i = 5; i < 2 * NP; ++i)
        if (i % NP >= 5) st.pos[i].w = 4;
    ck_assert_int_ne(a->measure(self, &st.st), 0);
    ck_assert_msg(strstr(c.msg, "no free charged species: the particles in no chain (n) are all neutral"), "%s", c.msg);
    a->destroy(self);
}
END_TEST

static void moving(two_state *st, int m)
{
    /* move one counterion in and out of reach so the series vary */
    st->pos[8].x = (m % 3) ? 5.0f : 2.5f;
    st->pos[NP + 9].y = (m % 2) ? 20.0f : 0.5f;
}

START_TEST(save_restore_equals_uninterrupted)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"distance", "1.5"}, {"per_valence", "true"}, {"plots", "false"}}, 3};
    metro_setup s = setup_of(2);
    metro_ctx c1, c2;
    new_ctx(&c1);
    new_ctx(&c2);
    void *x = NULL, *y = NULL;
    ck_assert_int_eq(a->create(&host, &c1, &p, &s, &x), 0);
    ck_assert_int_eq(a->create(&host, &c2, &p, &s, &y), 0);
    two_state st;
    two_state_init(&st);
    for (int m = 0; m < 37; ++m) {
        moving(&st, m);
        ck_assert_int_eq(a->measure(x, &st.st), 0);
    }
    ck_assert_int_eq(a->save(x), 0);
    ck_assert_int_eq(a->restore(y, c1.saved, c1.nsaved), 0);
    ck_assert_int_ne(a->restore(y, c1.saved, c1.nsaved - 8), 0); /* a truncated record is refused */
    ck_assert_int_eq(a->restore(y, c1.saved, c1.nsaved), 0);
    for (int m = 37; m < 80; ++m) {
        moving(&st, m);
        ck_assert_int_eq(a->measure(x, &st.st), 0);
        ck_assert_int_eq(a->measure(y, &st.st), 0);
    }
    ck_assert_int_eq(a->finish(x, &st.st), 0);
    ck_assert_int_eq(a->finish(y, &st.st), 0);
    a->destroy(x);
    a->destroy(y);
    char p1[1100], p2[1100];
    snprintf(p1, sizeof p1, "%s/condensation.csv", c1.dir);
    snprintf(p2, sizeof p2, "%s/condensation.csv", c2.dir);
    ck_assert_msg(metro_test_same_file(p1, p2), "the resumed file differs");
    double f = col(c1.dir, "condensation.csv", 0, "c_fraction"), e = col(c1.dir, "condensation.csv", 0, "c_fraction_err");
    ck_assert_msg(f > 0.5 && f < 0.75 && e > 0, "c_fraction %g +- %g", f, e); /* 2 or 3 of 4, varying */
    free(c1.saved);
}
END_TEST

/* ---- through the core ----------------------------------------------------- */

#define PE_INI                                                                                               \
    "[run]\nseed = 12\nsweeps = 300\nequilibration = 50\n\n"                                                 \
    "[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 16, 16\nchains = 2x8\n"            \
    "chain_species = m\n\n"                                                                                  \
    "[potential chain]\nplugin = lj_fene\nspecies = m\n\n"                                                   \
    "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 6\nbjerrum = 2\n\n"                             \
    "[sampler]\nplugin = parallel_tempering\nt_min = 0.5\nt_max = 2\nreplicas = 3\nstep = 0.3\n"            \
    "exchange_every = 10\n\n"

START_TEST(core_run_limits)
{
    /* below the contact distance of the hard cores (0.5) nothing is near;
     * beyond the cell's diameter everything is */
    const char *ini = PE_INI "[observable none]\nplugin = condensation\nevery = 10\ndistance = 0.4\nprefix = none_\n"
                             "plots = false\n\n"
                             "[observable all]\nplugin = condensation\nevery = 10\ndistance = 13\nprefix = all_\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    const char *dir = metro_test_run_dir();
    for (int k = 0; k < 3; ++k) {
        ck_assert_double_eq(col(dir, "none_condensation.csv", k, "c_fraction"), 0);
        ck_assert_double_eq(col(dir, "all_condensation.csv", k, "c_fraction"), 1);
        ck_assert_double_eq(col(dir, "all_condensation.csv", k, "samples"), 30);
    }
    ck_assert(isnan(col(dir, "all_condensation.csv", 3, "T")));
    ck_assert(isnan(col(dir, "all_condensation.csv", 0, "m_fraction"))); /* no free monomers: no column */
    struct stat sb;
    char png[1100];
    snprintf(png, sizeof png, "%s/all_condensation.png", dir);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        ck_assert_msg(stat(png, &sb) == 0 && sb.st_size > 1000, "all_condensation.png missing");
}
END_TEST

static void core_refused(const char *ini, const char *want)
{
    metro_test_refused(ini, "cond.ini", want);
}

START_TEST(core_refusals)
{
    /* the distance is required */
    core_refused(PE_INI "[observable c]\nplugin = condensation\n", "[observable c] distance: required");
    /* a lone chain: all particles in it */
    core_refused("[run]\nseed = 1\nsweeps = 10\n\n[system]\nparticles = 13\n\n[potential]\nplugin = lj_fene\n\n"
                 "[sampler]\nplugin = metropolis\ntemperature = 1\n\n"
                 "[observable c]\nplugin = condensation\ndistance = 1.5\n",
                 "every one of the 13 particles is in a chain");
    /* ions without chains */
    core_refused("[run]\nseed = 1\nsweeps = 10\n\n[system]\nparticles = 20\n\n[potential]\nplugin = coulomb_hs\n"
                 "valences = 1, -1\ndiameters = 1\ncell_radius = 10\nbjerrum = 1\n\n[sampler]\nplugin = brush\n\n"
                 "[observable c]\nplugin = condensation\ndistance = 1.5\n",
                 "the system has no chains");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("condensation");
    TCase *tc = tcase_create("condensation");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, fractions_by_hand);
    tcase_add_test(tc, observable_counts_by_hand);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, save_restore_equals_uninterrupted);
    tcase_add_test(tc, core_run_limits);
    tcase_add_test(tc, core_refusals);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
