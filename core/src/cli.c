/* core/src/cli.c — the `metro` program: run, list, describe. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "loader.h"
#include "ranks.h"
#include "metro/metro.h"
#include "util.h"

static const char usage[] =
    "usage: metro run CONFIG [--set SECTION.KEY=VALUE]... [--device auto|cpu|cuda]\n"
    "                        [--output DIR] [--overwrite] [--quiet] [--dry-run [--arch sm_NN]]\n"
    "                                  --dry-run: check everything, print the resolved config\n"
    "                                  and the work (sizes, memory, time), create nothing;\n"
    "                                  --arch: also link the device code for that GPU (none needed)\n"
    "       metro resume RUNDIR [--set SECTION.KEY=VALUE]... [--device ...] [--quiet]\n"
    "                                  continue a stopped run from RUNDIR/checkpoint.bin;\n"
    "                                  on a finished run, redo only its results (alias: analyze)\n"
    "       metro list                 one line per plugin: kind, name, version, summary\n"
    "       metro describe PLUGIN      a plugin's parameters: defaults, ranges, units, docs\n"
    "       metro --help | --version\n"
    "\n"
    "Plugins are searched in $METRO_PLUGIN_PATH, then beside libmetro, then the install prefix.\n"
    "Exit status: 0 success, 1 failure at run time, 2 bad usage or bad config,\n"
    "3 stopped by SIGINT/SIGTERM with the checkpoint written (resume continues).\n";

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "metro: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return METRO_EUSAGE;
}

static void print_errors(const metro_error *err)
{
    const char *m = err->msg;
    while (*m) {
        const char *nl = strchr(m, '\n');
        int len = nl ? (int)(nl - m) : (int)strlen(m);
        fprintf(stderr, "metro: %.*s\n", len, m);
        m += len + (nl != NULL);
    }
}

/* name: the command as typed (run, resume or analyze), for messages */
static int cmd_run(int argc, char **argv, int resume, const char *name)
{
    metro_options opt = {0};
    opt.resume = resume;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "--set") || !strcmp(a, "--device") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) { free(sets); return bad_usage("%s needs a value", a); }
            const char *v = argv[++i];
            if (!strcmp(a, "--set")) sets[opt.nsets++] = v;
            else if (!strcmp(a, "--device")) opt.device = v;
            else opt.output = v;
        } else if (!strncmp(a, "--set=", 6)) {
            sets[opt.nsets++] = a + 6;
        } else if (!strncmp(a, "--device=", 9)) {
            opt.device = a + 9;
        } else if (!strncmp(a, "--output=", 9)) {
            opt.output = a + 9;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            opt.quiet = 1;
        } else if (!strcmp(a, "--overwrite")) {
            opt.overwrite = 1;
        } else if (!strcmp(a, "--dry-run") && !resume) {
            opt.dry_run = 1;
        } else if (!strcmp(a, "--arch") && !resume) {
            if (++i >= argc) { free(sets); return bad_usage("%s", "--arch needs a GPU architecture (sm_90, ...)"); }
            opt.arch = argv[i];
        } else if (!strncmp(a, "--arch=", 7) && !resume) {
            opt.arch = a + 7;
        } else if (a[0] == '-' && a[1]) {
            free(sets);
            return bad_usage("unknown option %s", a);
        } else if (!opt.config_path) {
            opt.config_path = a;
        } else {
            free(sets);
            return bad_usage("one CONFIG only (also got %s)", a);
        }
    }
    if (!opt.config_path) {
        free(sets);
        return bad_usage("%s", !strcmp(name, "run") ? "run needs a CONFIG file"
                               : !strcmp(name, "analyze") ? "analyze needs a RUNDIR" : "resume needs a RUNDIR");
    }
    if (opt.arch) {
        const char *d = !strncmp(opt.arch, "sm_", 3) ? opt.arch + 3 : "";
        const int digits = *d && strspn(d, "0123456789") >= 2 && strlen(d) <= 4 &&
                           (!d[strspn(d, "0123456789")] || !strcmp(d + strspn(d, "0123456789"), "a"));
        if (!opt.dry_run) { free(sets); return bad_usage("%s", "--arch goes with --dry-run (a run links for its own GPU)"); }
        if (!digits) { free(sets); return bad_usage("--arch %s: not a GPU architecture (sm_80, sm_90, sm_90a, ...)", opt.arch); }
    }
    char cfgpath[4200];
    if (resume) {
        if (opt.output) { free(sets); return bad_usage("%s", "resume continues in RUNDIR itself: no --output"); }
        opt.output = opt.config_path;
        snprintf(cfgpath, sizeof cfgpath, "%s/config.ini", opt.config_path);
        opt.config_path = cfgpath;
        /* a folder without the config metro writes is no run of metro's */
        struct stat sb;
        const char *why = stat(opt.output, &sb) != 0 ? strerror(errno)
                          : !S_ISDIR(sb.st_mode)     ? "not a folder"
                          : access(cfgpath, F_OK)    ? "no config.ini in it"
                          : access(cfgpath, R_OK)    ? strerror(errno)
                                                     : NULL;
        if (why) {
            free(sets);
            fprintf(stderr, "metro: %s %s: not a run directory (%s): give the folder a run wrote (its config.ini and "
                            "checkpoint.bin in it)\n", name, opt.output, why);
            return METRO_EUSAGE;
        }
    }
    if (opt.output && !*opt.output) { free(sets); return bad_usage("%s", "--output needs a directory"); }
    opt.sets = sets;
    metro_error err = {0};
    metro_sim *sim = NULL;
    int systems = metro_ensemble_systems(&opt, &err);
    if (systems < 0) {
        print_errors(&err);
        free(sets);
        return METRO_EUSAGE;
    }
    if (systems > 0) {
        /* a dry run of an ensemble checks every system (every value of a
         * scan), then plans the first */
        int rc = metro_ensemble_run(&opt, &err);
        if (rc) print_errors(&err);
        free(sets);
        return rc;
    }
    int rc = metro_sim_create(&opt, &sim, &err);
    if (rc == METRO_OK && opt.dry_run) {
        /* one plan, not one a rank */
        if (metro__rank() == 0) rc = metro_sim_plan(sim, stdout);
    } else if (rc == METRO_OK) {
        if (metro__rank() == 0)
            fprintf(stderr, "metro: backend %s: %s%s\n", metro_sim_backend(sim) == METRO_BACKEND_CUDA ? "cuda" : "cpu",
                    metro_sim_device_name(sim), metro__ranks() > 1 ? " (rank 0 of an MPI run)" : "");
        rc = metro_sim_run(sim, &err);
    }
    if (rc) print_errors(&err);
    metro_sim_destroy(sim);
    free(sets);
    return rc;
}

static void list_one(const metro__plugin *p, void *user)
{
    (void)user;
    printf("%-11s %-20s %-8s %s\n", metro__kind_name(p->d->kind), p->d->name, p->d->version, p->d->summary);
}

static int cmd_list(void)
{
    metro_error err = {0};
    int n = metro__plugin_each(list_one, NULL, &err);
    if (err.msg[0]) print_errors(&err);
    if (!n) {
        fprintf(stderr, "metro: no plugins found in:");
        for (const char *const *d = metro__plugin_dirs(); *d; ++d) fprintf(stderr, " %s", *d);
        fprintf(stderr, "\n");
        return METRO_ERUN;
    }
    return METRO_OK;
}

static void list_none(const metro__plugin *p, void *user)
{
    (void)p, (void)user;
}

static int cmd_describe(const char *name)
{
    metro_error err = {0};
    const metro__plugin *p;
    if (metro__plugin_find(name, 0, &p, &err)) {
        if (err.msg[0]) print_errors(&err);
        else {
            char why[3000];
            metro_error ignore = {0};
            metro__plugin_each(list_none, NULL, &ignore);
            metro__plugin_not_found(name, 0, why, sizeof why);
            fprintf(stderr, "metro: %s\n", why);
        }
        return METRO_EUSAGE;
    }
    const metro_plugin *d = p->d;
    printf("%s %s %s: %s\n  file: %s\n  device code: %zu bytes of LTO-IR\n\n", metro__kind_name(d->kind),
           d->name, d->version, d->summary, p->path, d->device_ir_size);
    if (d->kind == METRO_KIND_POTENTIAL) {
        const metro_potential_api *api = d->api;
        printf("A term of the energy: alone as [potential], or one of several [potential NAME] sections whose\n"
               "energies add (docs/COMPOSITION.md).  Every term's energy is in the unit of the sampler's\n"
               "temperature (k_B = 1); a Coulomb term's bjerrum is the Bjerrum length at T = 1, so at T\n"
               "the coupling is bjerrum / T.  %s%s\n\n",
               api->flags & METRO_POTENTIAL_BONDS ? "It defines bonds: it owns the bonded pairs of the [system] "
                                                    "chains.  " : "",
               api->pair && api->external ? "It can be composed with other terms."
                                          : "It has no per-pair functions: only as the run's one potential.");
        printf("[potential NAME]\nplugin = %s\nspecies = ...    ; the [system] species it acts on (optional: all)\n",
               d->name);
    } else {
        printf("[%s]\nplugin = %s\n", d->kind == METRO_KIND_OBSERVABLE ? "observable NAME" : metro__kind_name(d->kind),
               d->name);
    }
    if (d->kind == METRO_KIND_OBSERVABLE) printf("every = 1        ; measure every this many sweeps (integer >= 1)\n");
    char allowed[1024];
    for (int i = 0; d->params && d->params[i].name; ++i) {
        const metro_param_decl *q = &d->params[i];
        metro__decl_allowed(q, allowed, sizeof allowed);
        printf("\n; %s\n; %s; %s%s\n%s = %s\n", q->doc, allowed, q->default_value ? "optional" : "REQUIRED",
               metro__plugin_resumable_has(d, q->name) ? "; a resume or analyze may change it" : "", q->name,
               q->default_value ? q->default_value : "");
    }
    return METRO_OK;
}

int metro_main(int argc, char **argv)
{
    if (argc < 2) { fputs(usage, stderr); return METRO_EUSAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return METRO_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("metro %s (plugin ABI %u)\n", METRO_VERSION_STRING, METRO_ABI_VERSION);
        return METRO_OK;
    }
    if (!strcmp(cmd, "run") || !strcmp(cmd, "resume") || !strcmp(cmd, "analyze")) {
        /* an MPI build under mpirun: every rank runs this; a failure on one
         * rank ends them all rather than leave the others in a collective.
         * A stop by signal is no failure: the ranks stop together (they
         * agree on it; an ensemble's ranks meet after their systems), their
         * checkpoints written, and finish as usual. */
        metro__ranks_init(&argc, &argv);
        int rc = cmd_run(argc - 2, argv + 2, strcmp(cmd, "run") != 0, cmd);
        if (rc && rc != METRO_ESTOPPED) metro__ranks_abort(rc);
        metro__ranks_finalize();
        return rc;
    }
    if (!strcmp(cmd, "list")) return argc == 2 ? cmd_list() : bad_usage("%s", "list takes no arguments");
    if (!strcmp(cmd, "describe"))
        return argc == 3 ? cmd_describe(argv[2]) : bad_usage("%s", "describe needs one PLUGIN name");
    return bad_usage("unknown command '%s'", cmd);
}
