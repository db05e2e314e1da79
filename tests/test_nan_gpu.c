/* test_nan_gpu — a potential's device code that gives a move a NaN energy
 * change stops the run on the GPU as on the CPU, naming the same move.
 * Every sampler's decision rejects NaN as it rejects an overlap, so the
 * chain was biased without a word on the GPU (the CPU paths already
 * stopped).  tests/plugins/nanfar: moves beyond `far` from the origin give
 * NaN (the chains start on a line out to 78, or are placed within 8, with
 * steps of 4). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *const samplers[] = {
    "metropolis\ntemperature = 1\nstep = 4\nscheme = block",
    "metropolis\ntemperature = 1\nstep = 4\nscheme = reduction",
    "parallel_tempering\ntemperatures = 1, 2, 3\nstep = 4\nexchange_every = 5",
    "brush\nstep = 4",
};

/* nanfar alone, and as the terms of a composed system (the core's
 * generated sum of terms on the GPU, its composite on the CPU) */
static const char *const systems[] = {
    "[system]\nparticles = 40\n[potential]\nplugin = nanfar\nfar = 79\n",
    "[system]\nspecies = a, b\ncounts = 20, 20\n[potential x]\nplugin = nanfar\nspecies = a\nfar = 8\n"
    "[potential y]\nplugin = nanfar\nspecies = b\nfar = 1000\n",
    /* the NaN from the pair term, with every partner */
    "[system]\nparticles = 40\n[potential]\nplugin = nanfar\nfar = 79\npair = 1\n",
};
#define NSYSTEMS (sizeof systems / sizeof *systems)

/* The message from "NaN for particle" up to its explanation. */
static char *which(const char *e)
{
    const char *a = e ? strstr(e, "NaN for particle") : NULL, *b = a ? strstr(a, " (a bug") : NULL;
    return a && b ? strndup(a, (size_t)(b - a)) : NULL;
}

START_TEST(nan_stops_the_gpu_run)
{
    char dir[] = "/tmp/metro-nan-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("METRO_PLUGIN_PATH", METRO_TEST_BINARY_DIR "/tests/fake-plugins/obs", 1);
    for (size_t q = 0; q < NSYSTEMS * sizeof samplers / sizeof *samplers; ++q) {
        const size_t k = q / NSYSTEMS;
        metro_test_write(dir, "n.ini", "[run]\nsweeps = 50\nequilibration = 0\n%s[sampler]\nplugin = %s\n",
                         systems[q % NSYSTEMS], samplers[k]);
        char *e[2], *w[2];
        int rc[2];
        for (int d = 0; d < 2; ++d) {
            rc[d] = metro_test_clif(&e[d], "run %s/n.ini --device %s --output %s/%s --overwrite --quiet", dir, d ? "cuda" : "cpu",
                                    dir, d ? "gpu" : "cpu");
            w[d] = which(e[d]);
        }
        static const char *const how[] = {"alone", "composed", "pair term"};
        printf("%s (%s): cpu: %s; cuda: %s\n", samplers[k], how[q % NSYSTEMS], w[0] ? w[0] : "-", w[1] ? w[1] : "-");
        ck_assert_msg(rc[0] == 1 && w[0], "%s, CPU: exit %d: %s", samplers[k], rc[0], e[0]);
        ck_assert_msg(rc[1] == 1 && w[1], "%s, CUDA: exit %d: %s", samplers[k], rc[1], e[1]);
        ck_assert_msg(!strcmp(w[0], w[1]), "%s: the CPU names %s, the GPU %s", samplers[k], w[0], w[1]);
        for (int d = 0; d < 2; ++d) free(e[d]), free(w[d]);
    }
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("nan_gpu");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, nan_stops_the_gpu_run);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
