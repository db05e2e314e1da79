/* test_trajectory_gpu — trajectories and initial files on the CUDA backend
 * (label gpu; skipped without a device):
 *
 *   - from the same initial file, the CPU and the GPU runs write the same
 *     chain: every frame of their GSD trajectories has the same sweep and
 *     positions within 1e-4 (the samplers' own GPU tests allow that much
 *     for a decision on a floating-point tie), for metropolis + lj_fene,
 *     parallel tempering + lj_fene by slot, brush + coulomb_hs;
 *   - on CUDA, a run stopped and resumed writes the straight run's GSD and
 *     XYZ files byte for byte.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "testutil.h"

static char dir[64];

static void sh(const char *cmd)
{
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

static void run_ok(const char *args)
{
    char *e = NULL;
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "metro %s: exit %d: %s", args, rc, e);
    free(e);
}

/* Run cfg on device into dir/out_DEVICE with `extra` --set words. */
static void run_on(const char *cfg, const char *device, const char *out, const char *extra)
{
    char args[4096];
    snprintf(args, sizeof args, "run %s/%s --device %s --output %s/%s --quiet %s", dir, cfg, device, dir, out, extra);
    run_ok(args);
}

static void write_cfg(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Every frame of a and b: same sweep, positions within tol. */
static void same_chain(const char *a, const char *b, double tol)
{
    char err[4096];
    metro__frame_in fa, fb;
    ck_assert_msg(metro__frames_read(a, -1, &fa, err, sizeof err) == 0, "%s", err);
    long frames = fa.frames;
    metro__frame_in_free(&fa);
    ck_assert_int_gt(frames, 1);
    for (long k = 0; k < frames; ++k) {
        ck_assert_msg(metro__frames_read(a, k, &fa, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(metro__frames_read(b, k, &fb, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(fb.frames, frames);
        ck_assert_int_eq(fa.step, fb.step);
        ck_assert_int_eq(fa.particles, fb.particles);
        for (int i = 0; i < 3 * fa.particles; ++i)
            ck_assert_msg(fabs((double)fa.xyz[i] - fb.xyz[i]) <= tol, "frame %ld (sweep %lld), particle %d: CPU %.9g, GPU %.9g",
                          k, fa.step, i / 3, fa.xyz[i], fb.xyz[i]);
        for (int i = 0; i < fa.particles; ++i) ck_assert_str_eq(fa.names[fa.type[i]], fb.names[fb.type[i]]);
        metro__frame_in_free(&fa);
        metro__frame_in_free(&fb);
    }
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/metro-trajgpu-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */ }
}

static void cpu_equals_gpu(const char *cfg, const char *start_cfg, const char *traj, const char *const *files)
{
    char extra[1024], a[512], b[512];
    /* the initial file: the last frame of a short CPU run */
    write_cfg("start.ini", start_cfg);
    run_on("start.ini", "cpu", "start", "");
    write_cfg("c.ini", cfg);
    snprintf(extra, sizeof extra, "--set system.initial=%s/start/%s", dir, traj);
    run_on("c.ini", "cpu", "cpu", extra);
    run_on("c.ini", "cuda", "cuda", extra);
    for (int k = 0; files[k]; ++k) {
        snprintf(a, sizeof a, "%s/cpu/%s", dir, files[k]);
        snprintf(b, sizeof b, "%s/cuda/%s", dir, files[k]);
        same_chain(a, b, 1e-4);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/start %s/cpu %s/cuda", dir, dir, dir);
    sh(cmd);
}

START_TEST(same_chain_from_an_initial_file)
{
    cpu_equals_gpu("[run]\nseed = 21\nsweeps = 2000\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                   "[sampler]\nplugin = metropolis\ntemperature = 0.5\n"
                   "[observable t]\nplugin = trajectory\nevery = 100\n",
                   "[run]\nseed = 20\nsweeps = 500\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                   "[sampler]\nplugin = metropolis\ntemperature = 0.5\n"
                   "[observable t]\nplugin = trajectory\nevery = 500\nformat = xyz\n",
                   "trajectory.xyz", (const char *const[]){"trajectory.gsd", NULL});
    cpu_equals_gpu("[run]\nseed = 22\nsweeps = 1000\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                   "[sampler]\nplugin = parallel_tempering\nreplicas = 4\nt_min = 0.3\nt_max = 1.2\nstep = 0.05\n"
                   "[observable t]\nplugin = trajectory\nevery = 100\nslots = 0, 3\n",
                   "[run]\nseed = 20\nsweeps = 500\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                   "[sampler]\nplugin = metropolis\ntemperature = 0.5\n"
                   "[observable t]\nplugin = trajectory\nevery = 500\n",
                   "trajectory.gsd", (const char *const[]){"trajectory_t0.gsd", "trajectory_t3.gsd", NULL});
    const char *ions = "[system]\nparticles = 512\n[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 4\n"
                       "cell_radius = 60\nbjerrum = 7.117\n[sampler]\nplugin = brush\nstep = 20\n";
    char c[1024], s[1024];
    snprintf(c, sizeof c, "[run]\nseed = 23\nsweeps = 40\n%s[observable t]\nplugin = trajectory\nevery = 10\n", ions);
    snprintf(s, sizeof s, "[run]\nseed = 24\nsweeps = 20\n%s[observable t]\nplugin = trajectory\nevery = 20\n", ions);
    cpu_equals_gpu(c, s, "trajectory.gsd", (const char *const[]){"trajectory.gsd", NULL});
}
END_TEST

START_TEST(resume_on_cuda)
{
    const char *cfg = "[run]\nseed = 31\nsweeps = %d\ncheck_every = 300\n[system]\nparticles = 13\n"
                      "[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 0.6\n"
                      "[observable g]\nplugin = trajectory\nevery = 10\n"
                      "[observable x]\nplugin = trajectory\nevery = 40\nformat = xyz\n";
    char text[1024], args[1024], a[512], b[512];
    snprintf(text, sizeof text, cfg, 2000);
    write_cfg("full.ini", text);
    snprintf(text, sizeof text, cfg, 900);
    write_cfg("half.ini", text);
    run_on("full.ini", "cuda", "full", "");
    run_on("half.ini", "cuda", "split", "");
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=2000 --device cuda --quiet", dir);
    run_ok(args);
    const char *files[] = {"trajectory.gsd", "trajectory.xyz"};
    for (int k = 0; k < 2; ++k) {
        snprintf(a, sizeof a, "%s/full/%s", dir, files[k]);
        snprintf(b, sizeof b, "%s/split/%s", dir, files[k]);
        ck_assert_msg(metro_test_same_file(a, b), "on CUDA %s differs between the straight and the resumed run", files[k]);
    }
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("trajectory_gpu");
    TCase *tc = tcase_create("cuda");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, same_chain_from_an_initial_file);
    tcase_add_test(tc, resume_on_cuda);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
