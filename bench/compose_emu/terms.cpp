// bench/compose_emu/terms.cpp — the two terms' device functions, for the
// host, from the same METRO_HD headers the plugins' .cu files use.
#include <math.h>
#include "metro/hd.h"
#include "coulomb_hs.h"
#include "lj_fene.h"
#define CHS(P) ((const coulomb_hs_params *)(P))
#define LJ(P) ((const metro_lj_fene_params *)(P))
extern "C" {
float coulomb_hs__pair_energy(const void *P, float4 a, float4 b) { return coulomb_hs_pair(CHS(P), a, b); }
float coulomb_hs__external_energy(const void *P, float4 a) { return coulomb_hs_external(CHS(P), a); }
float coulomb_hs__pair_delta(const void *P, float4 t, float4 o, float4 b) { return coulomb_hs_pair_delta(CHS(P), t, o, b); }
metro_pd_sum coulomb_hs__pair_delta_begin(const void *P, float4 t, float4 o) { return coulomb_hs_sum_begin(CHS(P), t, o); }
void coulomb_hs__pair_delta_add(const void *P, metro_pd_sum *s, float4 b) { coulomb_hs_sum_add(CHS(P), s, b); }
float coulomb_hs__pair_delta_end(const void *P, const metro_pd_sum *s) { return coulomb_hs_sum_end(s); }
float lj_fene__pair_energy(const void *P, float4 a, float4 b) { return metro_lj_fene_lj(LJ(P), metro_dist2(a, b)); }
float lj_fene__bond_energy(const void *P, float4 a, float4 b) { return metro_lj_fene_bond(LJ(P), metro_dist2(a, b)); }
float lj_fene__external_energy(const void *P, float4 a) { return 0.0f; }
float lj_fene__pair_delta(const void *P, float4 t, float4 o, float4 b) { return metro_lj_fene_lj(LJ(P), metro_dist2(t, b)) - metro_lj_fene_lj(LJ(P), metro_dist2(o, b)); }
metro_pd_sum lj_fene__pair_delta_begin(const void *P, float4 t, float4 o) { metro_pd_sum s{}; s.t = t; s.o = o; return s; }
void lj_fene__pair_delta_add(const void *P, metro_pd_sum *s, float4 b) { s->v[0] += lj_fene__pair_delta(P, s->t, s->o, b); }
float lj_fene__pair_delta_end(const void *P, const metro_pd_sum *s) { return s->v[0]; }
}
