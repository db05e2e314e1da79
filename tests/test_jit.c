/* test_jit — JIT-LTO composition on a machine with no GPU: every
 * (sampler x potential) pair, with every observable, links for sm_90; the
 * cubin cache is used, and a damaged entry is rebuilt, never trusted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit.h"
#include "loader.h"
#include "lone_source.h"
#include "testutil.h"

typedef struct found {
    const metro__plugin *p[64];
    int n;
} found;

static void collect(const metro__plugin *p, void *user)
{
    found *f = user;
    if (f->n < 64) f->p[f->n++] = p;
}

START_TEST(every_pair_links_for_sm90)
{
    found f = {0};
    metro_error err = {0};
    metro__plugin_each(collect, &f, &err);
    int pairs = 0, pots = 0, smps = 0;
    for (int i = 0; i < f.n; ++i) {
        pots += f.p[i]->d->kind == METRO_KIND_POTENTIAL;
        smps += f.p[i]->d->kind == METRO_KIND_SAMPLER;
    }
    ck_assert_int_ge(pots, 1);
    ck_assert_int_ge(smps, 1);
    for (int i = 0; i < f.n; ++i) {
        if (f.p[i]->d->kind != METRO_KIND_POTENTIAL) continue;
        for (int j = 0; j < f.n; ++j) {
            if (f.p[j]->d->kind != METRO_KIND_SAMPLER) continue;
            metro__ir irs[64];
            int n = 0;
            char *src = lone_source(f.p[i]->d);
            irs[n++] = (metro__ir){"core", metro__core_ir, metro__core_ir_size, 0};
            irs[n++] = lone_ir(src);
            irs[n++] = (metro__ir){f.p[i]->d->name, f.p[i]->d->device_ir, f.p[i]->d->device_ir_size, 0};
            irs[n++] = (metro__ir){f.p[j]->d->name, f.p[j]->d->device_ir, f.p[j]->d->device_ir_size, 0};
            for (int k = 0; k < f.n; ++k)
                if (f.p[k]->d->kind == METRO_KIND_OBSERVABLE)
                    irs[n++] = (metro__ir){f.p[k]->d->name, f.p[k]->d->device_ir, f.p[k]->d->device_ir_size, 0};
            void *cubin = NULL;
            size_t size = 0;
            metro_error e = {0};
            int rc = metro__jit_link(irs, n, "sm_90", &cubin, &size, &e);
            free(src);
            ck_assert_msg(rc == METRO_OK, "%s x %s: %s", f.p[j]->d->name, f.p[i]->d->name, e.msg);
            ck_assert_uint_gt(size, 1000);
            ck_assert_int_eq(memcmp(cubin, "\177ELF", 4), 0);
            /* METRO_JIT_DUMP=DIR keeps the cubins, for cuobjdump / nvdisasm */
            const char *dump = getenv("METRO_JIT_DUMP");
            if (dump && *dump) {
                char path[1024];
                snprintf(path, sizeof path, "%s/%s_%s.cubin", dump, f.p[j]->d->name, f.p[i]->d->name);
                FILE *out = fopen(path, "wb");
                ck_assert_msg(out && fwrite(cubin, 1, size, out) == size && fclose(out) == 0, "cannot write %s", path);
            }
            free(cubin);
            printf("linked %s x %s (+ observables) for sm_90: %zu bytes\n", f.p[j]->d->name, f.p[i]->d->name, size);
            ++pairs;
        }
    }
    ck_assert_int_ge(pairs, 1);
}
END_TEST

/* A composite's generated source (core/src/compose.c): a short-ranged
 * bonded term on one species beside a long-ranged term on all, as a
 * charged chain with counterions has, compiles with NVRTC and links with
 * every sampler for sm_90. */
START_TEST(composite_links_for_sm90)
{
    found f = {0};
    metro_error err = {0};
    metro__plugin_each(collect, &f, &err);
    const metro__plugin *lj = NULL, *chs = NULL;
    for (int i = 0; i < f.n; ++i) {
        if (!strcmp(f.p[i]->d->name, "lj_fene")) lj = f.p[i];
        if (!strcmp(f.p[i]->d->name, "coulomb_hs")) chs = f.p[i];
    }
    ck_assert_ptr_nonnull(lj);
    ck_assert_ptr_nonnull(chs);
    static int first[2] = {0, 8}, length[2] = {8, 8};
    static const metro_topology chains = {2, first, length, NULL};
    metro__compose_desc d = {.n = 2, .all = 3, .bond = 0, .topology = &chains};
    d.name[0] = "lj_fene";
    d.mask[0] = 1;
    d.range[0] = 2.245;
    d.name[1] = "coulomb_hs";
    d.mask[1] = 3;
    char *src = metro__compose_text(&d);
    ck_assert_ptr_nonnull(src);
    /* the long-ranged term keeps its own run form; the short one is gated,
     * in the runs' second pass, asked for by the least distance */
    ck_assert_msg(strstr(src, "coulomb_hs__pair_delta_begin((metro_potential_params + 1024), t, o)") &&
                      strstr(src, "s->near = fminf(s->near, fminf(metro__d2(s->t, b), metro__d2(s->o, b)))") &&
                      strstr(src, "return metro__in(1u, s->t) && s->near < 5.04") &&
                      strstr(src, "metro_pair_delta_near_add(metro_pd_sum *s, float4 b) {\n    if (") &&
                      strstr(src, "s->rest += lj_fene__pair_delta"),
                  "%s", src);
    int links = 0;
    for (int j = 0; j < f.n; ++j) {
        if (f.p[j]->d->kind != METRO_KIND_SAMPLER || !f.p[j]->d->device_ir_size) continue;
        metro__ir irs[5] = {{"core", metro__core_ir, metro__core_ir_size, 0}, lone_ir(src),
                            {"lj_fene", lj->d->device_ir, lj->d->device_ir_size, 0},
                            {"coulomb_hs", chs->d->device_ir, chs->d->device_ir_size, 0},
                            {f.p[j]->d->name, f.p[j]->d->device_ir, f.p[j]->d->device_ir_size, 0}};
        void *cubin = NULL;
        size_t size = 0;
        metro_error e = {0};
        ck_assert_msg(metro__jit_link(irs, 5, "sm_90", &cubin, &size, &e) == METRO_OK, "%s: %s", f.p[j]->d->name, e.msg);
        ck_assert_int_eq(memcmp(cubin, "\177ELF", 4), 0);
        const char *dump = getenv("METRO_JIT_DUMP");
        if (dump && *dump) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s_composite.cubin", dump, f.p[j]->d->name);
            FILE *out = fopen(path, "wb");
            ck_assert_msg(out && fwrite(cubin, 1, size, out) == size && fclose(out) == 0, "cannot write %s", path);
        }
        free(cubin);
        ++links;
    }
    ck_assert_int_ge(links, 3);
    free(src);
}
END_TEST

START_TEST(unresolved_symbol_is_reported)
{
    /* The core alone calls the device ABI that no potential provides. */
    metro__ir irs[1] = {{"core", metro__core_ir, metro__core_ir_size, 0}};
    void *cubin = NULL;
    size_t size = 0;
    metro_error e = {0};
    ck_assert_int_eq(metro__jit_link(irs, 1, "sm_90", &cubin, &size, &e), METRO_ERUN);
    ck_assert_msg(strstr(e.msg, "Unresolved extern function 'metro_") != NULL, "message: %s", e.msg);
}
END_TEST

/* metro/device.h declares the term functions, so a potential that writes
 * one with another signature (an older ABI's, without its parameter
 * block; a double) is refused by nvcc, not linked to misbehave on the GPU:
 * extern "C" functions cannot be overloaded. */
START_TEST(term_signatures_are_checked_by_the_compiler)
{
    static const char *const bodies[] = {
        "extern \"C\" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b) { return 0.0f; }",
        "extern \"C\" __device__ float METRO_TERM(pair_energy)(float4 a, float4 b) { return 0.0f; }",
        "extern \"C\" __device__ double METRO_TERM(external_energy)(const void *P, float4 a) { return 0.0; }",
    };
    char dir[] = "/tmp/metro-sig-XXXXXX", cmd[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int k = 0; k < 3; ++k) {
        metro_test_write(dir, "t.cu", "#include \"metro/device.h\"\n%s\n", bodies[k]);
        snprintf(cmd, sizeof cmd, "%s -arch=lto_90 -rdc=true -c -std=c++17 -DMETRO_TERM_NAME=term -I%s/core/include "
                                  "-o %s/t.o %s/t.cu > %s/log 2>&1", METRO_TEST_NVCC, METRO_TEST_SOURCE_DIR, dir, dir, dir);
        const int rc = system(cmd);
        snprintf(cmd, sizeof cmd, "%s/log", dir);
        char *log = metro_test_slurp(cmd);
        if (k == 0) ck_assert_msg(rc == 0, "the ABI's own signature did not compile: %s", log ? log : "");
        else ck_assert_msg(rc != 0 && log && strstr(log, "term__"), "%s compiled: %s", bodies[k], log ? log : "");
        free(log);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(cache_is_used_and_damage_rebuilt)
{
    char dir[] = "/tmp/metro-cache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("METRO_CACHE_DIR", dir, 1);
    metro_error e = {0};
    const metro__plugin *pot, *smp;
    ck_assert_int_eq(metro__plugin_find("lj_fene", METRO_KIND_POTENTIAL, &pot, &e), METRO_OK);
    ck_assert_int_eq(metro__plugin_find("metropolis", METRO_KIND_SAMPLER, &smp, &e), METRO_OK);
    char *src = lone_source(pot->d);
    metro__ir irs[4] = {{"core", metro__core_ir, metro__core_ir_size, 0},
                        lone_ir(src),
                        {"lj_fene", pot->d->device_ir, pot->d->device_ir_size, 0},
                        {"metropolis", smp->d->device_ir, smp->d->device_ir_size, 0}};
    void *a, *b, *c;
    size_t na, nb, nc;
    int cached;
    ck_assert_int_eq(metro__jit_cached(irs, 4, "sm_90", &a, &na, &cached, &e), METRO_OK);
    ck_assert_int_eq(cached, 0);
    ck_assert_int_eq(metro__jit_cached(irs, 4, "sm_90", &b, &nb, &cached, &e), METRO_OK);
    ck_assert_int_eq(cached, 1);
    ck_assert_uint_eq(na, nb);
    ck_assert_int_eq(memcmp(a, b, na), 0);
    /* damage the entry: flip a byte in the middle of the cubin */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "f=$(ls %s/*.cubin) && printf 'X' | dd of=$f bs=1 seek=2000 conv=notrunc status=none", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro__jit_cached(irs, 4, "sm_90", &c, &nc, &cached, &e), METRO_OK);
    ck_assert_int_eq(cached, 0);
    ck_assert_uint_eq(na, nc);
    ck_assert_int_eq(memcmp(a, c, na), 0);
    /* and the rebuilt entry is good again */
    free(c);
    ck_assert_int_eq(metro__jit_cached(irs, 4, "sm_90", &c, &nc, &cached, &e), METRO_OK);
    ck_assert_int_eq(cached, 1);
    free(a);
    free(b);
    free(c);
    free(src);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jit");
    TCase *tc = tcase_create("link");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_pair_links_for_sm90);
    tcase_add_test(tc, composite_links_for_sm90);
    tcase_add_test(tc, unresolved_symbol_is_reported);
    tcase_add_test(tc, term_signatures_are_checked_by_the_compiler);
    tcase_add_test(tc, cache_is_used_and_damage_rebuilt);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
