/* tests/plugins/fake.c — deliberately broken plugins for test_loader.
 * Built several times, once per defect (FAKE_* below), each into a file
 * whose name the loader checks against the descriptor. */
#include "metro/plugin.h"

static int s_create(const metro_host_api *h, metro_ctx *c, const metro_params *p, metro_setup *s, void **self)
{
    (void)h; (void)c; (void)p; (void)s;
    *self = (void *)1;
    return 0;
}
static void s_destroy(void *self) { (void)self; }
static int s_start(void *self, metro_state *st, const metro_potential_api *pot, void *ps)
{
    (void)self; (void)st; (void)pot; (void)ps;
    return 0;
}
__attribute__((unused)) static int s_advance(void *self, metro_state *st, long n) { (void)self; (void)st; (void)n; return 0; }
static int s_sync(void *self, metro_state *st) { (void)self; (void)st; return 0; }
static int s_save(void *self) { (void)self; return 0; }
static int s_restore(void *self, const void *d, size_t n) { (void)self; (void)d; (void)n; return 0; }

#ifndef FAKE_TABLE_VERSION
#define FAKE_TABLE_VERSION METRO_ABI_VERSION
#endif
/* FAKE_RESUMABLE: .resumable names a parameter it does not declare */
#ifdef FAKE_RESUMABLE
static const char *const resumable[] = {"knob", "nob", NULL};
#define FAKE_RESUMABLE_LIST resumable
#else
#define FAKE_RESUMABLE_LIST NULL
#endif
__attribute__((unused)) static const metro_sampler_api api = {
    FAKE_TABLE_VERSION, s_create, s_destroy, s_start,
#ifdef FAKE_MISSING_FN
    NULL, /* advance missing */
#else
    s_advance,
#endif
    s_sync, s_sync, s_save, s_restore, NULL, NULL, NULL, NULL, NULL, FAKE_RESUMABLE_LIST};

/* FAKE_BONDS_NO_FN: a potential that says it owns the bonds
 * (METRO_POTENTIAL_BONDS) without their energy function bond();
 * FAKE_FN_NO_BONDS: one with bond() but without the flag */
#if defined FAKE_BONDS_NO_FN || defined FAKE_FN_NO_BONDS
static const void *p_params(void *self, size_t *size) { (void)self; *size = 0; return NULL; }
static int p_initial(void *self, metro_ctx *c, metro_float4 *pos, int n)
{
    (void)self; (void)c; (void)pos; (void)n;
    return 0;
}
static double p_delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 t)
{
    (void)self; (void)pos; (void)n; (void)i; (void)t;
    return 0;
}
static double p_total(void *self, const metro_float4 *pos, int n) { (void)self; (void)pos; (void)n; return 0; }
static float p_pair(void *self, metro_float4 a, metro_float4 b) { (void)self; (void)a; (void)b; return 0; }
static float p_external(void *self, metro_float4 a) { (void)self; (void)a; return 0; }
static const metro_potential_api pot_api = {
    .version = METRO_ABI_VERSION, .create = s_create, .destroy = s_destroy, .device_params = p_params,
    .initial = p_initial, .delta = p_delta, .total = p_total,
#ifdef FAKE_FN_NO_BONDS
    .bond = p_pair,
#else
    .flags = METRO_POTENTIAL_BONDS,
#endif
    .pair = p_pair, .external = p_external};
#define FAKE_KIND METRO_KIND_POTENTIAL
#define FAKE_API (&pot_api)
#else
#define FAKE_KIND METRO_KIND_SAMPLER
#define FAKE_API (&api)
#endif

/* FAKE_DECL: one mistake in the declarations (a second parameter) */
__attribute__((unused)) static const metro_param_decl params[] = {
    {"knob", METRO_PARAM_REAL, "1", 0, 2, NULL, "", "a knob"},
#if FAKE_DECL == 1
    {"knob", METRO_PARAM_INT, "1", 0, 2, NULL, "", "the same name again"},
#elif FAKE_DECL == 2
    {"span", METRO_PARAM_REAL, "1", 5, -5, NULL, "", "min above max"},
#elif FAKE_DECL == 3
    {"level", METRO_PARAM_INT, "1.5", 0, 10, NULL, "", "a default its type refuses"},
#elif FAKE_DECL == 4
    {"mode", METRO_PARAM_CHOICE, "c", 0, 0, "a|b", "", "a default not among the choices"},
#elif FAKE_DECL == 5
    {"plugin", METRO_PARAM_STRING, "", 0, 0, NULL, "", "the core's own key"},
#elif FAKE_DECL == 6
    {"x=y", METRO_PARAM_REAL, "1", 0, 2, NULL, "", "not a key"},
#elif FAKE_DECL == 7
    {"odd", (metro_param_type)42, "1", 0, 2, NULL, "", "an unknown type"},
#elif FAKE_DECL == 8
    {"wide", METRO_PARAM_REAL, "1", -__builtin_inf(), 2, NULL, "", "an infinite end"},
/* 9-15: what the resolved config.ini could not write and read back */
#elif FAKE_DECL == 9
    {"label", METRO_PARAM_STRING, "a ; b", 0, 0, NULL, "", "a comment in the default"},
#elif FAKE_DECL == 10
    {"label", METRO_PARAM_STRING, "a # b", 0, 0, NULL, "", "another dialect's comment"},
#elif FAKE_DECL == 11
    {"label", METRO_PARAM_STRING, "\"quoted\"", 0, 0, NULL, "", "quotes"},
#elif FAKE_DECL == 12
    {"label", METRO_PARAM_STRING, "  padded  ", 0, 0, NULL, "", "blanks the reader trims"},
#elif FAKE_DECL == 13
    {"label", METRO_PARAM_STRING, "a\nknob = 2", 0, 0, NULL, "", "a line of its own"},
#elif FAKE_DECL == 14
    {"q", METRO_PARAM_REAL, "1", 0, 10, NULL, "", "first line\nknob = 2"},
#elif FAKE_DECL == 15
    {"q", METRO_PARAM_REAL, "1", 0, 10, NULL, "K\r", "a unit with a carriage return"},
#elif FAKE_DECL == 16
    {"mode", METRO_PARAM_CHOICE, NULL, 0, 0, "soft | hard", "", "blanks around the '|'"},
#endif
    METRO_PARAM_END};

#ifndef FAKE_NO_ENTRY
METRO_EXPORT const metro_plugin *metro_plugin_entry(void)
{
    static metro_plugin d = {METRO_ABI_VERSION, FAKE_KIND, FAKE_NAME, "0.0.1",
                             "a deliberately broken plugin", params, FAKE_API, NULL, 0};
#ifdef FAKE_BAD_ABI
    d.abi_version = 999;
#endif
#ifdef FAKE_SUMMARY_NL
    d.summary = "a summary\n[run]";
#endif
#ifdef FAKE_BAD_KIND
    d.kind = (metro_kind)7;
#endif
    return &d;
}
#else
int metro_something_else(void) { return 0; }
#endif
