// bench/compose_emu/main.cpp — brush's runs of 32 partners with the second
// pass (metro/device.h, as samplers/brush/brush.cu's brush_run makes them),
// against the per-pair sum of metro_pair_delta, for every particle of a
// dense composed system; "broken" skips the second pass (it must then
// differ).  Exit status 0 when every move agrees within 1e-4.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metro/hd.h"
#include "coulomb_hs.h"
#include "lj_fene.h"
extern unsigned char metro_potential_params[];
extern "C" {
metro_pd_sum metro_pair_delta_begin(float4 t, float4 o);
void metro_pair_delta_add(metro_pd_sum *s, float4 b);
bool metro_pair_delta_near(const metro_pd_sum *s);
void metro_pair_delta_near_add(metro_pd_sum *s, float4 b);
float metro_pair_delta_end(const metro_pd_sum *s);
float metro_pair_delta(float4 t, float4 o, float4 b);
}
static float U() { return rand() / (float)RAND_MAX; }
int main(int argc, char **argv) {
    int broken = argc > 1;
    metro_lj_fene_params lj = {};
    float s = 0.623629f; lj.sigma2 = s*s; lj.rc2 = 2.5f*2.5f*s*s; lj.eps4 = 4; lj.core2 = 0.01f;
    float ir6 = 1/powf(2.5f,6); lj.shift = 4*(ir6*ir6 - ir6);
    memcpy(metro_potential_params, &lj, sizeof lj);
    coulomb_hs_params c = {};
    c.nspecies = 2; c.bjerrum = 2; c.cell_radius = 8;
    float z[2] = {-1, 1};
    for (int k = 0; k < 2; ++k) { c.sp[k].x = z[k]; c.sp[k].y = 0.25f; c.sp[k].z = 2*z[k]; c.sp[k].w = (8-0.25f)*(8-0.25f); }
    memcpy(metro_potential_params + 1024, &c, sizeof c);
    int n = 384, bad = 0, passes = 0; double worst = 0;
    float4 *p = (float4 *)malloc(sizeof *p * n);
    for (int i = 0; i < n; ++i) { float4 q; do { q.x = 16*U()-8; q.y = 16*U()-8; q.z = 16*U()-8; } while (q.x*q.x+q.y*q.y+q.z*q.z > 49); q.w = i < n/2 ? 0 : 1; p[i] = q; }
    for (int i = 0; i < n; ++i) {
        float4 o = p[i], t = o; t.x += U()-0.5f; t.y += U()-0.5f; t.z += U()-0.5f;
        double two = 0, ref = 0;
        for (int r0 = 0; r0 < n; r0 += 32) {           // runs of 32 (brush_run)
            int m = n - r0 < 32 ? n - r0 : 32;
            metro_pd_sum f = metro_pair_delta_begin(t, o);
            for (int k = 0; k < m; ++k) if (r0 + k != i) metro_pair_delta_add(&f, p[r0 + k]);
            if (!broken && metro_pair_delta_near(&f)) { ++passes; for (int k = 0; k < m; ++k) if (r0 + k != i) metro_pair_delta_near_add(&f, p[r0 + k]); }
            two += (double)metro_pair_delta_end(&f);
            for (int k = 0; k < m; ++k) if (r0 + k != i) ref += (double)metro_pair_delta(t, o, p[r0 + k]);
        }
        if (isinf(ref) != isinf(two)) { ++bad; continue; }
        if (isinf(ref)) continue;
        double e = fabs(two - ref) / (1 + fabs(ref));
        if (e > worst) worst = e;
        if (e > 1e-4) ++bad;
    }
    printf("%s: second passes %d, moves differing %d, worst relative %.3g\n", broken ? "no second pass" : "two passes", passes, bad, worst);
    return bad != 0;
}
