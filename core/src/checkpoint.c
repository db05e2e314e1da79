/* core/src/checkpoint.c — checkpoint.bin: which chain it belongs to, the
 * state, every plugin's saved state, and resuming from it.
 *
 * Layout (format 2, little-endian as the machine writes it):
 *   "METROCK2"
 *   u64 identity digest, u64 length L, L bytes of identity text
 *   i32 contexts, particles, replicas, measuring; i64 sweep
 *   positions, energies, beta, slot_replica, accepted, attempted
 *   per plugin instance (potential, sampler, observables in config order):
 *     u64 random-stream offset, u64 size, size bytes of saved state
 *   u64 FNV-1a checksum of everything before it
 *
 * The identity text is one line per key that defines the chain ("backend
 * cpu", "[run] seed = 5", "[sampler] plugin = brush 1.2.0", ...): the
 * resolved config less the keys a resume may change (RESUMABLE below), the
 * plugins' names and versions, the backend and the format.  A resume
 * recomputes it from the config it was given and refuses a checkpoint
 * whose identity differs, naming the keys.
 *
 * The previous checkpoint is kept as checkpoint.bin.prev (linked there
 * once the new one is written and synced, just before the new one takes
 * its name), so one damaged file never loses the run, and a kill at any
 * moment leaves a complete checkpoint under checkpoint.bin.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "util.h"

#define MAGIC "METROCK2"

/* [run] keys a resume may change: how long to run and where/how often to
 * write.  Everything else defines the chain. */
static const char *const RESUMABLE[] = {"sweeps", "output", "device", "check_every", "checkpoint_minutes",
                                        "drift_tolerance", "systems", "scan", NULL};

static int resumable(const char *section, const char *key)
{
    /* where the first configuration came from: a resume starts from the
     * checkpoint's */
    if (!strcmp(section, "system"))
        return !strcmp(key, "initial") || !strcmp(key, "initial_frame") || !strcmp(key, "numbering");
    if (strcmp(section, "run")) return 0;
    for (int i = 0; RESUMABLE[i]; ++i)
        if (!strcmp(key, RESUMABLE[i])) return 1;
    return 0;
}

/* d: the section's plugin, whose .resumable keys (ABI 8) are left out too */
static void identity_params(FILE *f, const char *section, const metro_params *p, const metro_plugin *d)
{
    for (int j = 0; p && j < p->n; ++j)
        if (!resumable(section, p->decls[j].name) && !(d && metro__plugin_resumable_has(d, p->decls[j].name)))
            fprintf(f, "[%s] %s = %s\n", section, p->decls[j].name, p->v[j].text);
}

/* A checkpoint's identity without the lines of keys this run's plugins
 * now call resumable: one written before a plugin named them (ABI 7)
 * holds them, and is still this run's (heap). */
static char *without_resumable(metro_sim *sim, const char *text)
{
    char *out = metro__xmalloc(strlen(text) + 1), *o = out;
    for (const char *l = text; *l;) {
        const size_t n = strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n');
        int drop = 0;
        const char *close = l[0] == '[' ? memchr(l, ']', n) : NULL;
        for (int i = 0; close && !drop && i < metro__nctx(sim); ++i) {
            metro_ctx *c = metro__ctx_at(sim, i);
            const size_t sl = strlen(c->section);
            if ((size_t)(close - l - 1) != sl || strncmp(l + 1, c->section, sl) || close[1] != ' ') continue;
            const char *key = close + 2, *eq = strstr(key, " = ");
            if (!eq || eq > l + n) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(eq - key), key);
            drop = metro__plugin_resumable_has(c->plugin->d, name);
        }
        if (!drop) memcpy(o, l, n), o += n;
        l += n;
    }
    *o = 0;
    return out;
}

/* The identity text of this run (heap, NUL-terminated). */
static char *identity(metro_sim *sim, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    fprintf(f, "format %s\nbackend %s\n", MAGIC, sim->setup.backend == METRO_BACKEND_CUDA ? "cuda" : "cpu");
    identity_params(f, "run", sim->run, NULL);
    identity_params(f, "system", sim->system, NULL);
    /* a system that took its species or chains from [system] initial
     * (initial.c): they define the chain, though the file may change at a
     * resume */
    const metro_setup *su = &sim->setup;
    if (sim->initial_species) {
        fprintf(f, "[system] species from the initial file =");
        for (int s = 0; s < su->species; ++s)
            fprintf(f, "%s %s %.17g %.17g %ld", s ? "," : "", su->species_table[s].name, su->species_table[s].charge,
                    su->species_table[s].diameter, su->species_table[s].count);
        fprintf(f, "\n");
    }
    if (sim->initial_chains) {
        const metro_topology *t = &su->topology;
        fprintf(f, "[system] chains from the initial file =");
        for (int c = 0; c < t->chains;) {
            int r = 1;
            while (c + r < t->chains && t->length[c + r] == t->length[c]) ++r;
            fprintf(f, "%s %dx%d", c ? "," : "", r, t->length[c]);
            c += r;
        }
        fprintf(f, "\n");
    }
    for (int i = 0; i < metro__nctx(sim); ++i) {
        metro_ctx *c = metro__ctx_at(sim, i);
        fprintf(f, "[%s] plugin = %s %s\n", c->section, c->plugin->d->name, c->plugin->d->version);
        if (metro__ctx_kind(sim, i) == METRO_KIND_POTENTIAL) fprintf(f, "[%s] species = %#x\n", c->section, c->mask);
        if (metro__ctx_kind(sim, i) == METRO_KIND_OBSERVABLE) fprintf(f, "[%s] every = %ld\n", c->section, c->every);
        identity_params(f, c->section, c->params, c->plugin->d);
    }
    fclose(f);
    return text;
}

metro_ctx *metro__ctx_at(metro_sim *sim, int i)
{
    return i < sim->nterms ? &sim->terms[i] : i == sim->nterms ? &sim->smp : &sim->obs[i - sim->nterms - 1];
}

int metro__nctx(const metro_sim *sim)
{
    return sim->nterms + 1 + sim->nobs;
}

int metro__ctx_kind(const metro_sim *sim, int i)
{
    return i < sim->nterms ? METRO_KIND_POTENTIAL : i == sim->nterms ? METRO_KIND_SAMPLER : METRO_KIND_OBSERVABLE;
}

/* ---- writing --------------------------------------------------------------- */

typedef struct cbuf {
    unsigned char *p;
    size_t n, cap;
} cbuf;

static void cput(cbuf *b, const void *d, size_t n)
{
    if (!n) return;
    if (b->n + n > b->cap) {
        while (b->n + n > b->cap) b->cap = b->cap ? 2 * b->cap : 1 << 16;
        b->p = metro__xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static int ctx_save(metro_sim *sim, metro_ctx *c, int i)
{
    c->save_n = 0;
    if (metro__ctx_kind(sim, i) == METRO_KIND_POTENTIAL) return 0; /* potentials are stateless */
    if (metro__ctx_kind(sim, i) == METRO_KIND_SAMPLER) return ((const metro_sampler_api *)c->plugin->d->api)->save(c->self);
    return ((const metro_observable_api *)c->plugin->d->api)->save(c->self);
}

int metro_sim_checkpoint(metro_sim *sim, metro_error *err)
{
    /* every rank syncs (a collective where the replicas are spread), the
     * writer writes */
    int rc = metro__sync(sim, err);
    if (rc || !sim->dir) return rc;
    metro_state *st = &sim->st;
    cbuf b = {0};
    size_t idlen = 0;
    char *id = identity(sim, &idlen);
    if (!id) return metro__fail(err, METRO_ERUN, "checkpoint: out of memory");
    uint64_t digest = metro__fnv(METRO__FNV_INIT, id, idlen), len = idlen;
    int32_t nctx = metro__nctx(sim), n = st->particles, r = st->replicas, meas = st->measuring;
    int64_t sweep = st->sweep;
    cput(&b, MAGIC, 8);
    cput(&b, &digest, 8);
    cput(&b, &len, 8);
    cput(&b, id, idlen);
    free(id);
    cput(&b, &nctx, 4); cput(&b, &n, 4); cput(&b, &r, 4); cput(&b, &meas, 4); cput(&b, &sweep, 8);
    size_t np = (size_t)n * (size_t)r;
    cput(&b, st->pos, sizeof *st->pos * np);
    cput(&b, st->energy, sizeof *st->energy * (size_t)r);
    cput(&b, st->beta, sizeof *st->beta * (size_t)r);
    cput(&b, st->slot_replica, sizeof *st->slot_replica * (size_t)r);
    cput(&b, st->accepted, sizeof *st->accepted * (size_t)r);
    cput(&b, st->attempted, sizeof *st->attempted * (size_t)r);
    for (int i = 0; i < nctx && !rc; ++i) {
        metro_ctx *c = metro__ctx_at(sim, i);
        uint64_t off = c->rng.offset, size;
        if (ctx_save(sim, c, i)) {
            rc = metro__plugin_failed(c, err, METRO_ERUN, "could not save its state");
            break;
        }
        size = c->save_n;
        cput(&b, &off, 8);
        cput(&b, &size, 8);
        cput(&b, c->save_buf, size);
    }
    uint64_t sum = metro__fnv(METRO__FNV_INIT, b.p, b.n);
    cput(&b, &sum, 8);
    if (!rc) {
        char path[4200], prev[4300];
        snprintf(path, sizeof path, "%s/checkpoint.bin", sim->dir);
        snprintf(prev, sizeof prev, "%s.prev", path);
        /* the last good one becomes .prev as the new one takes its name;
         * after a resume from .prev the file under the name is the damaged
         * one, which only gives way (as .prev it would replace the one good
         * copy) */
        rc = metro__write_atomic(path, b.p, b.n, sim->ck_used_prev ? NULL : prev, err);
        if (!rc) sim->ck_used_prev = 0;
    }
    free(b.p);
    return rc;
}

/* ---- reading --------------------------------------------------------------- */

static int cget(const unsigned char **p, const unsigned char *end, void *d, size_t n)
{
    if ((size_t)(end - *p) < n) return -1;
    if (n) memcpy(d, *p, n);
    *p += n;
    return 0;
}

/* Read and check one file: 0, or -1 with why in *why. */
static int load(const char *path, unsigned char **data, size_t *size, char *why, size_t nwhy)
{
    *data = (unsigned char *)metro__read_file(path, size);
    if (!*data) {
        snprintf(why, nwhy, "%s: cannot be read: %s", path, strerror(errno));
        return -1;
    }
    uint64_t sum;
    if (*size >= 8 && !memcmp(*data, "METROCK1", 8)) {
        snprintf(why, nwhy, "%s: written by an older metro (checkpoint format 1, before checkpoints recorded "
                            "which chain they belong to): cannot resume it", path);
    } else if (*size < 40 || memcmp(*data, MAGIC, 8) ||
               (memcpy(&sum, *data + *size - 8, 8), sum != metro__fnv(METRO__FNV_INIT, *data, *size - 8))) {
        snprintf(why, nwhy, "%s: damaged (bad magic or checksum)", path);
    } else {
        return 0;
    }
    free(*data);
    *data = NULL;
    return -1;
}

/* Identity lines are "KEY = VALUE" or a bare "KEY VALUE" (format, backend). */
static size_t key_len(const char *line, size_t l)
{
    const char *eq = memmem(line, l, " = ", 3);
    if (eq) return (size_t)(eq - line);
    const char *sp = memchr(line, ' ', l);
    return sp ? (size_t)(sp - line) : l;
}

/* The line of text with key line[0..kl), or NULL. */
static const char *find_key(const char *text, const char *key, size_t kl)
{
    for (const char *t = text; *t;) {
        size_t l = strcspn(t, "\n");
        if (key_len(t, l) == kl && !strncmp(t, key, kl)) return t;
        t += l + (t[l] == '\n');
    }
    return NULL;
}

/* Species s's name in an identity text's "[system] species = a, b, ..."
 * line, or in this system's table where the text has none (a lone term
 * declared them), into out; "?" if neither has it. */
static void species_name(const char *text, const metro_setup *su, int s, char *out, size_t n)
{
    const char *line = find_key(text, "[system] species", 16);
    if (line) {
        const char *v = line + 19, *end = v + strcspn(v, "\n");
        for (int k = 0; k < s && v < end; ++k) {
            const char *c = memchr(v, ',', (size_t)(end - v));
            v = c ? c + 1 : end;
            while (v < end && *v == ' ') ++v;
        }
        const size_t l = strcspn(v, ",\n");
        if (v < end) {
            snprintf(out, n, "%.*s", (int)l, v);
            return;
        }
    }
    snprintf(out, n, "%s", !line && s < su->species ? su->species_table[s].name : "?");
}

/* A term's "[SECTION] species = 0xMASK" line as the species' names, each
 * by the side's own [system] species (a reordered list is then read
 * right, and named as a difference of its own). */
static const char *as_names(const metro_setup *su, const char *text, const char *line, size_t kl, char *buf, size_t n)
{
    const size_t l = line ? strcspn(line, "\n") : 0;
    if (!line || kl < 9 || strncmp(line + kl - 9, "] species", 9) || l < kl + 5 || strncmp(line + kl + 3, "0x", 2))
        return line;
    unsigned long m = strtoul(line + kl + 3, NULL, 16);
    int used = snprintf(buf, n, "%.*s = ", (int)kl, line), first = 1;
    char name[64];
    for (int s = 0; s < 32 && used > 0 && (size_t)used < n; ++s)
        if (m >> s & 1ul) {
            species_name(text, su, s, name, sizeof name);
            used += snprintf(buf + used, n - (size_t)used, "%s%s", first ? "" : ", ", name);
            first = 0;
        }
    return buf;
}

static void add_difference(char *out, size_t n, const char *key, size_t kl, const char *a, const char *b)
{
    size_t used = strlen(out);
    size_t al = a ? strcspn(a, "\n") : 0, bl = b ? strcspn(b, "\n") : 0;
    size_t as = a && al > kl ? kl + 1 + (a[kl + 1] == '=' ? 2 : 0) : al, bs = b && bl > kl ? kl + 1 + (b[kl + 1] == '=' ? 2 : 0) : bl;
    if (used + 64 < n)
        snprintf(out + used, n - used, "%s  %.*s: the checkpoint has %s%.*s%s, the config %s%.*s%s", used ? "\n" : "",
                 (int)kl, key, a ? "'" : "", a ? (int)(al - as) : 4, a ? a + as : "none", a ? "'" : "",
                 b ? "'" : "", b ? (int)(bl - bs) : 4, b ? b + bs : "none", b ? "'" : "");
}

/* Every key whose line differs between the checkpoint's identity (have)
 * and this config's (want). */
static void name_differences(const metro_setup *su, const char *have, const char *want, char *out, size_t n)
{
    char ha[1200], wa[1200];
    out[0] = 0;
    for (const char *w = want; *w;) {
        size_t l = strcspn(w, "\n"), kl = key_len(w, l);
        const char *h = find_key(have, w, kl);
        if (!h || strcspn(h, "\n") != l || strncmp(h, w, l))
            add_difference(out, n, w, kl, as_names(su, have, h, kl, ha, sizeof ha),
                           as_names(su, want, w, kl, wa, sizeof wa));
        w += l + (w[l] == '\n');
    }
    for (const char *h = have; *h;) {
        size_t l = strcspn(h, "\n"), kl = key_len(h, l);
        if (!find_key(want, h, kl)) add_difference(out, n, h, kl, as_names(su, have, h, kl, ha, sizeof ha), NULL);
        h += l + (h[l] == '\n');
    }
}

int metro__checkpoint_check(metro_sim *sim, metro_error *err)
{
    char path[4200], prev[4300], why[4400], why_prev[4400];
    snprintf(path, sizeof path, "%s/checkpoint.bin", sim->dir);
    snprintf(prev, sizeof prev, "%s.prev", path);
    size_t size = 0;
    const char *used = path;
    if (load(path, &sim->ck, &size, why, sizeof why)) {
        if (load(prev, &sim->ck, &size, why_prev, sizeof why_prev))
            return metro__fail(err, METRO_ERUN, "%s; and the previous one, %s: cannot resume", why, why_prev);
        metro__log(sim, METRO_LOG_WARN, "%s; resuming from the previous checkpoint, %s", why, prev);
        used = prev;
    }
    sim->ck_size = size;
    const unsigned char *p = sim->ck + 8, *end = sim->ck + size - 8;
    uint64_t digest, len;
    if (cget(&p, end, &digest, 8) || cget(&p, end, &len, 8) || (uint64_t)(end - p) < len)
        return metro__fail(err, METRO_ERUN, "%s: truncated", used);
    size_t mylen = 0;
    char *mine = identity(sim, &mylen);
    char *theirs = metro__xmalloc(len + 1);
    memcpy(theirs, p, len);
    theirs[len] = 0;
    p += len;
    int rc = METRO_OK;
    char *kept = without_resumable(sim, theirs);
    if (digest != metro__fnv(METRO__FNV_INIT, theirs, len) || strcmp(mine, kept)) {
        char diff[6000];
        name_differences(&sim->setup, kept, mine, diff, sizeof diff);
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: belongs to another chain; a resume may change only [run] sweeps (upward), device, "
                         "check_every, checkpoint_minutes, drift_tolerance, [system] initial, initial_frame, "
                         "numbering, and the keys `metro describe PLUGIN` marks as a resume's to change. What "
                         "differs:\n%s",
                         used, diff[0] ? diff : "  (the plugins' order)");
    }
    free(kept);
    free(mine);
    free(theirs);
    if (rc) return rc;
    int32_t nctx = 0, n = 0, r = 0, meas = 0;
    int64_t sweep = 0;
    const unsigned char *q = p;
    cget(&q, end, &nctx, 4); cget(&q, end, &n, 4); cget(&q, end, &r, 4);
    /* the identity fixes the config; sizes a plugin derives must agree too */
    if (nctx != metro__nctx(sim) || n != sim->st.particles || r != sim->st.replicas)
        return metro__fail(err, METRO_EUSAGE,
                           "%s: written for %d particles x %d replicas with %d observables; the config now asks %d x %d with %d",
                           used, n, r, nctx - sim->nterms - 1, sim->st.particles, sim->st.replicas, sim->nobs);
    /* sweeps may extend a run, not cut it below what it has done: the
     * resolved config would then describe a shorter run than its results */
    if (cget(&q, end, &meas, 4) || cget(&q, end, &sweep, 8)) return metro__fail(err, METRO_ERUN, "%s: truncated", used);
    if (sweep > (int64_t)sim->equilibration + sim->sweeps) {
        metro__entry *e = metro__config_find(sim->cfg, "run", "sweeps");
        return metro__fail(err, METRO_EUSAGE,
                           "%s: [run] sweeps: %ld would end the run before where it stands (%lld sweeps done, "
                           "%ld of them equilibration; allowed: sweeps >= %lld, to extend it)",
                           e ? e->where : metro__config_section_where(sim->cfg, "run"), sim->sweeps, (long long)sweep,
                           sim->equilibration, (long long)(sweep - sim->equilibration));
    }
    sim->ck_used_prev = used == prev;
    sim->ck_rest = p;
    return METRO_OK;
}

int metro__resume_positions(metro_sim *sim, metro_error *err)
{
    metro_state *st = &sim->st;
    const unsigned char *p = sim->ck_rest, *end = sim->ck + sim->ck_size - 8;
    int32_t head[4];
    int64_t sweep;
    if (cget(&p, end, head, sizeof head) || cget(&p, end, &sweep, 8) ||
        cget(&p, end, st->pos, sizeof *st->pos * (size_t)st->particles * (size_t)st->replicas))
        return metro__fail(err, METRO_ERUN, "%s/checkpoint.bin: truncated", sim->dir ? sim->dir : ".");
    return METRO_OK;
}

int metro__resume_state(metro_sim *sim, metro_error *err)
{
    metro_state *st = &sim->st;
    const unsigned char *p = sim->ck_rest, *end = sim->ck + sim->ck_size - 8;
    int32_t nctx, n, r, meas = 0;
    int64_t sweep = 0;
    cget(&p, end, &nctx, 4); cget(&p, end, &n, 4); cget(&p, end, &r, 4);
    if (cget(&p, end, &meas, 4) || cget(&p, end, &sweep, 8) ||
        cget(&p, end, st->pos, sizeof *st->pos * (size_t)n * (size_t)r) ||
        cget(&p, end, st->energy, sizeof *st->energy * (size_t)r))
        return metro__fail(err, METRO_ERUN, "%s/checkpoint.bin: truncated", sim->dir);
    st->sweep = sweep;
    st->measuring = meas;
    sim->ck_rest = p;
    int rc = METRO_OK;
    if (st->backend == METRO_BACKEND_CUDA &&
        ((rc = metro__upload(sim, st->d_pos, st->pos, sizeof *st->pos * (size_t)n * (size_t)r, err, "the checkpoint's positions")) ||
         (rc = metro__upload(sim, st->d_energy, st->energy, sizeof *st->energy * (size_t)r, err, "the checkpoint's energies"))))
        return rc;
    return METRO_OK;
}

int metro__resume_plugins(metro_sim *sim, metro_error *err)
{
    metro_state *st = &sim->st;
    const unsigned char *p = sim->ck_rest, *end = sim->ck + sim->ck_size - 8;
    size_t r = (size_t)st->replicas;
    if (cget(&p, end, st->beta, sizeof *st->beta * r) || cget(&p, end, st->slot_replica, sizeof *st->slot_replica * r) ||
        cget(&p, end, st->accepted, sizeof *st->accepted * r) || cget(&p, end, st->attempted, sizeof *st->attempted * r))
        return metro__fail(err, METRO_ERUN, "%s/checkpoint.bin: truncated", sim->dir);
    for (int i = 0; i < metro__nctx(sim); ++i) {
        metro_ctx *c = metro__ctx_at(sim, i);
        int kind = metro__ctx_kind(sim, i);
        uint64_t off, size;
        if (cget(&p, end, &off, 8) || cget(&p, end, &size, 8) || (uint64_t)(end - p) < size)
            return metro__fail(err, METRO_ERUN, "%s/checkpoint.bin: truncated", sim->dir);
        metro__rng_free(&c->rng);
        c->rng.offset = off;
        int bad = 0;
        if (kind == METRO_KIND_SAMPLER) bad = ((const metro_sampler_api *)c->plugin->d->api)->restore(c->self, p, size);
        if (kind == METRO_KIND_OBSERVABLE) bad = ((const metro_observable_api *)c->plugin->d->api)->restore(c->self, p, size);
        if (bad) return metro__plugin_failed(c, err, METRO_ERUN, "could not restore its state");
        p += size;
    }
    free(sim->ck);
    sim->ck = NULL;
    return METRO_OK;
}
