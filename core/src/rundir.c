/* core/src/rundir.c — the run directory: where it is, its lock, the
 * resolved config, and result files that appear whole or not at all.
 *
 * Nothing here runs before the whole run has been validated (sim.c): a
 * refused config leaves no directory behind.  Every file metro writes
 * whole goes through a temporary in the same folder that is synced and
 * renamed over the old one (metro__write_atomic for files the core writes
 * in one piece, metro__output_open/metro__outputs_commit for the plugins'
 * result files), so a kill, a full disk or a file-size limit never leaves a
 * truncated result that looks like one.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define LOCK_NAME ".lock"

const char *metro__rundir_path(const metro_sim *sim, const metro_options *opt, char *buf, size_t n)
{
    const char *out = opt->output ? opt->output : metro__param_string(sim->run, "output");
    if (out && (*out || opt->output)) return out;
    const char *p = opt->config_path ? opt->config_path : "run";
    const char *b = strrchr(p, '/');
    b = b ? b + 1 : p;
    size_t l = strcspn(b, ".");
    snprintf(buf, n, "runs/%.*s", (int)l, b);
    return buf;
}

static int exists(const char *dir, const char *name)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

/* The PID of the process holding dir's lock (take_lock, below), 0 if none
 * does (or there is no lock file); the lock itself is left alone. */
static long lock_holder(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    const long pid = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : 0;
    close(fd);
    return pid;
}

/* Whether dir is a run directory: a config.ini metro wrote (a run's
 * resolved config or an ensemble's; both start "; metro "), not a user's
 * file of that name, beside what only a run leaves (its lock, log,
 * checkpoint or systems): a resolved config copied into a project folder
 * to be run again does not make the folder metro's. */
static int metro_config(const char *dir)
{
    char path[4200], head[9] = "";
    snprintf(path, sizeof path, "%s/config.ini", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(head, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(head, "; metro ", 8) &&
           (exists(dir, LOCK_NAME) || exists(dir, "log.txt") || exists(dir, "checkpoint.bin") ||
            exists(dir, "system_000"));
}

/* Where a new run may write: a folder that is missing or empty (but for a
 * lock a refused run left), or, with --overwrite, a run directory of
 * metro's, which the overwrite empties.  Anything else is a folder of the
 * user's (`--output .`, a project folder, a home): metro does not write
 * its files over theirs, nor remove them.  0, or -1 with err filled. */
static int new_run_folder(const char *dir, int overwrite, metro_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) return 0;
    if (!S_ISDIR(sb.st_mode)) return metro__fail(err, METRO_EUSAGE, "%s: exists and is not a directory", dir);
    if (metro_config(dir)) {
        if (overwrite) return 0;
        return metro__fail(err, METRO_EUSAGE,
                           "%s: a run directory already exists there (choose another --output, or --overwrite)", dir);
    }
    DIR *d = opendir(dir);
    if (!d) return metro__fail(err, METRO_EUSAGE, "%s: cannot be read: %s", dir, strerror(errno));
    /* a run killed while writing its first config.ini leaves its lock and
     * temporaries: metro's, taken as new (a *.tmp without the lock may be
     * anyone's, and the run would remove it) */
    const int locked = exists(dir, LOCK_NAME);
    char first[300] = "";
    int others = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t l = strlen(e->d_name);
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, LOCK_NAME)) continue;
        if (locked && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) continue;
        if (!others++) snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (!others) return 0;
    return metro__fail(err, METRO_EUSAGE,
                       "%s: exists and holds %d entr%s that %s not a metro run's ('%s'%s), which %s: metro writes a run "
                       "into a new or empty folder, or over a run directory of its own with --overwrite (one whose "
                       "config.ini metro wrote); choose another --output",
                       dir, others, others == 1 ? "y" : "ies", others == 1 ? "is" : "are", first,
                       others > 1 ? ", ..." : "", overwrite ? "--overwrite would remove" : "the run would write among");
}

int metro__rundir_check(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    char buf[1024];
    const char *out = metro__rundir_path(sim, opt, buf, sizeof buf);
    if (!*out) return METRO_OK;
    /* other ranks write nothing: only a resume's checkpoint concerns them */
    if (!sim->writer && !opt->resume) return METRO_OK;
    if (opt->resume) {
        if (!exists(out, "checkpoint.bin") && !exists(out, "checkpoint.bin.prev")) {
            /* a run still going that has not checkpointed yet: say so,
             * rather than that there is nothing to resume */
            const long pid = lock_holder(out);
            if (pid > 0)
                return metro__fail(err, METRO_EUSAGE,
                                   "%s: in use by another metro process (PID %ld), which has written no checkpoint yet; "
                                   "wait for it to end or stop it first", out, pid);
            if (exists(out, "config.ini"))
                return metro__fail(err, METRO_EUSAGE,
                                   "%s: no checkpoint.bin to resume from: the run stopped before its first checkpoint "
                                   "(start it again: metro run %s/config.ini --output %s --overwrite)", out, out, out);
            return metro__fail(err, METRO_EUSAGE, "%s: no checkpoint.bin to resume from", out);
        }
        return METRO_OK;
    }
    return new_run_folder(out, opt->overwrite, err) ? METRO_EUSAGE : METRO_OK;
}

/* An advisory lock (fcntl) on DIR/.lock, held as long as the process
 * lives: the kernel drops it when the holder dies, even by kill -9, so a
 * stale lock cannot block a resume. */
static int take_lock(int *lock_fd, const char *dir, metro_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return metro__fail(err, METRO_ERUN, "%s: cannot be created: %s", path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        close(fd);
        const long pid = lock_holder(dir);
        if (pid > 0)
            return metro__fail(err, METRO_EUSAGE,
                               "%s: in use by another metro process (PID %ld); wait for it to end or stop it first",
                               dir, pid);
        return metro__fail(err, METRO_EUSAGE, "%s: in use by another metro process (its lock %s is held)", dir, path);
    }
    char pid[32];
    int l = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)l) != l) { /* informative only */ }
    *lock_fd = fd;
    return METRO_OK;
}

/* system_NNN, an ensemble's system folder */
static int system_folder(const char *name)
{
    if (strncmp(name, "system_", 7)) return 0;
    int digits = 0;
    for (const char *c = name + 7; *c; ++c, ++digits)
        if (*c < '0' || *c > '9') return 0;
    return digits >= 3;
}

/* Plain files of a run directory: with all=1 every one but the lock
 * (--overwrite), else the temporaries a killed run left (*.tmp). */
static void remove_files(const char *dir, int all);

/* --overwrite of DIR, whose lock this process holds: every plain file but
 * the lock, and the system_NNN folders of an ensemble that ran there (left
 * behind, they made the next resume take a single run for an ensemble, or
 * an ensemble of 3 for one of 5).  Only folders that are metro's (a
 * config.ini in them) are touched, and everything is checked before
 * anything is removed: a system folder in use by another process (resumed
 * on its own) or holding a subfolder refuses the overwrite as a whole.
 * 0, or -1 with err filled. */
static int clear_rundir(const char *dir, metro_error *err)
{
    int rc = 0;
    for (int pass = 0; pass < 2 && !rc; ++pass) {
        DIR *d = opendir(dir);
        if (!d) break;
        struct dirent *e;
        char path[3800]; /* room for the names added below */
        while ((e = readdir(d)) && !rc) {
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (!system_folder(e->d_name) || lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || !exists(path, "config.ini"))
                continue;
            if (pass == 1) {
                remove_files(path, 1);
                char lock[4300];
                snprintf(lock, sizeof lock, "%s/" LOCK_NAME, path);
                unlink(lock);
                if (rmdir(path) != 0)
                    rc = metro__fail(err, METRO_EUSAGE, "%s: cannot be removed: %s", path, strerror(errno));
                continue;
            }
            const long pid = lock_holder(path);
            if (pid > 0) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: in use by another metro process (PID %ld): --overwrite of %s "
                                                    "would remove it; wait for it to end or stop it first",
                                 path, pid, dir);
                continue;
            }
            DIR *sub = opendir(path);
            for (struct dirent *f; sub && !rc && (f = readdir(sub));) {
                char inner[4400];
                snprintf(inner, sizeof inner, "%s/%s", path, f->d_name);
                if (strcmp(f->d_name, ".") && strcmp(f->d_name, "..") && lstat(inner, &sb) == 0 && S_ISDIR(sb.st_mode))
                    rc = metro__fail(err, METRO_EUSAGE, "%s: a former ensemble's system folder holds a folder of its "
                                                        "own (%s), which --overwrite does not remove: move it, or "
                                                        "choose another --output", path, f->d_name);
            }
            if (sub) closedir(sub);
        }
        closedir(d);
    }
    if (!rc) remove_files(dir, 1);
    return rc;
}

int metro__ensemble_dir_open(const char *dir, int resume, int overwrite, int *lock_fd, metro_error *err)
{
    if (!resume && new_run_folder(dir, overwrite, err)) return METRO_EUSAGE;
    if (!resume && metro__mkdirs(dir))
        return metro__fail(err, METRO_EUSAGE, "%s: cannot create the run directory: %s", dir, strerror(errno));
    return take_lock(lock_fd, dir, err);
}

int metro__ensemble_resumable(const char *dir, int k, metro_error *err)
{
    const long pid = lock_holder(dir);
    if (pid > 0)
        return metro__fail(err, METRO_EUSAGE, "%s: in use by another metro process (PID %ld); wait for it to end or stop "
                                              "it first", dir, pid);
    char sys[4000]; /* room for exists()'s name after it */
    for (int i = 0; i < k; ++i) {
        snprintf(sys, sizeof sys, "%.3980s/system_%03d", dir, i);
        if (!exists(sys, "checkpoint.bin") && !exists(sys, "checkpoint.bin.prev") && lock_holder(sys) <= 0)
            return metro__fail(err, METRO_EUSAGE,
                               "%s: no checkpoint.bin to resume from: the ensemble stopped before this system's first "
                               "checkpoint, and an ensemble resumes as a whole (start it again: metro run %s/config.ini "
                               "--output %s --overwrite)", sys, dir, dir);
    }
    return METRO_OK;
}

int metro__ensemble_dir_clear(const char *dir, metro_error *err)
{
    return clear_rundir(dir, err) ? METRO_EUSAGE : METRO_OK;
}

void metro__ensemble_dir_undo(const char *dir, int lock_fd, int fresh, int made)
{
    const int run_there = metro_config(dir);
    close(lock_fd);
    if (fresh || made) {
        metro__rundir_unmake(dir);
        if (!fresh) mkdir(dir, 0777); /* it was there, empty or a run of --overwrite: it stays a folder */
    } else if (!run_there) {
        char lock[4200];
        snprintf(lock, sizeof lock, "%s/%s", dir, LOCK_NAME);
        unlink(lock);
    }
}

static void remove_files(const char *dir, int all)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4200];
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (!strcmp(e->d_name, LOCK_NAME) || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!all && !(l > 4 && !strcmp(e->d_name + l - 4, ".tmp"))) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
    }
    closedir(d);
}

void metro__rundir_unmake(const char *dir)
{
    remove_files(dir, 1);
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/%s", dir, LOCK_NAME);
    unlink(lock);
    rmdir(dir);
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void dir_of(const char *path, char *buf, size_t n)
{
    const char *s = strrchr(path, '/');
    if (!s) snprintf(buf, n, ".");
    else snprintf(buf, n, "%.*s", (int)(s - path), path);
}

/* The file under path is kept as keep while path goes on naming it until
 * the new file is renamed over it: a second name made in keep's folder
 * (keep.tmp) is renamed over keep, so at every moment path names a
 * complete file and keep the previous one or this one, and if anything
 * fails, keep and path are as they were (removing keep before a link that
 * then failed once lost the only good copy).  A file system without hard
 * links gets the rename of path to keep, which leaves a moment with only
 * keep.  0 or an errno. */
static int keep_old(const char *path, const char *keep)
{
    char second[4400];
    snprintf(second, sizeof second, "%s.tmp", keep);
    unlink(second); /* a leftover of a run killed here */
    if (link(path, second) == 0) {
        if (rename(second, keep) == 0) return 0;
        const int e = errno;
        unlink(second);
        return e;
    }
    if (errno == ENOENT) return 0; /* nothing to keep yet */
    if (errno != EPERM && errno != EOPNOTSUPP && errno != EMLINK && errno != EXDEV) return errno;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return EISDIR;
    return rename(path, keep) == 0 || errno == ENOENT ? 0 : errno;
}

int metro__write_atomic(const char *path, const void *data, size_t n, const char *keep, metro_error *err)
{
    char tmp[4300], dir[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    const char *p = data;
    size_t left = n;
    int e = 0;
    while (left && !e) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) e = w < 0 ? errno : EIO;
        else p += w, left -= (size_t)w;
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e && keep) e = keep_old(path, keep);
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s (%zu bytes)", path, strerror(e), n);
    }
    dir_of(path, dir, sizeof dir);
    sync_dir(dir);
    return METRO_OK;
}

void metro__write_resolved(metro_sim *sim, FILE *f, const char *what)
{
    time_t t = time(NULL);
    char ts[64];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", localtime(&t));
    fprintf(f, "; metro %s: the resolved configuration of %s (%s), every default written out.\n"
               "; Re-run it as is: metro run config.ini --output OTHER_DIR\n\n",
            METRO_VERSION_STRING, what ? what : "this run", ts);
    fprintf(f, "[run]\n");
    metro__params_write(f, sim->run);
    fprintf(f, "\n[system]\n");
    metro__params_write(f, sim->system);
    for (int i = 0; i < metro__nctx(sim); ++i) {
        metro_ctx *c = metro__ctx_at(sim, i);
        fprintf(f, "\n[%s]\n; %s %s %s: %s\nplugin = %s\n", c->section, metro__kind_name(c->plugin->d->kind),
                c->plugin->d->name, c->plugin->d->version, c->plugin->d->summary, c->plugin->d->name);
        metro__entry *sp = metro__ctx_kind(sim, i) == METRO_KIND_POTENTIAL
                               ? metro__config_find(sim->cfg, c->section, "species") : NULL;
        if (sp) fprintf(f, "; the species this term acts on\nspecies = %s\n", sp->value);
        if (metro__ctx_kind(sim, i) == METRO_KIND_OBSERVABLE) fprintf(f, "; measure every this many sweeps\nevery = %ld\n", c->every);
        metro__params_write(f, c->params);
    }
}

static int write_config(metro_sim *sim, metro_error *err)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return metro__fail(err, METRO_ERUN, "cannot write the resolved config: %s", strerror(errno));
    metro__write_resolved(sim, f, NULL);
    fclose(f);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.ini", sim->dir);
    int rc = metro__write_atomic(path, text, n, NULL, err);
    free(text);
    return rc;
}

int metro__rundir_lock(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    char buf[1024];
    const char *out = metro__rundir_path(sim, opt, buf, sizeof buf);
    if (!*out || sim->lock_fd >= 0) return METRO_OK;
    return take_lock(&sim->lock_fd, out, err);
}

int metro__rundir_open(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    char buf[1024];
    const char *out = metro__rundir_path(sim, opt, buf, sizeof buf);
    if (!*out) return METRO_OK; /* no run directory (tests) */
    /* a file-size limit must be an error message (EFBIG), not a silent
     * death by SIGXFSZ */
    signal(SIGXFSZ, SIG_IGN);
    if (!opt->resume && metro__mkdirs(out))
        return metro__fail(err, METRO_EUSAGE, "%s: cannot create the run directory: %s", out, strerror(errno));
    int rc = sim->lock_fd >= 0 ? METRO_OK : take_lock(&sim->lock_fd, out, err);
    if (rc) return rc;
    sim->dir = metro__strdup(out);
    if (!opt->resume && opt->overwrite && (rc = clear_rundir(out, err))) return rc;
    remove_files(out, 0);
    if ((!opt->resume || opt->nsets) && (rc = write_config(sim, err))) return rc;
    char path[4200];
    snprintf(path, sizeof path, "%s/log.txt", out);
    sim->log = fopen(path, opt->resume ? "a" : "w");
    if (!sim->log) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    metro__log_flush_early(sim);
    return METRO_OK;
}

void metro__rundir_close(metro_sim *sim)
{
    metro__outputs_discard(sim);
    if (sim->log) fclose(sim->log);
    sim->log = NULL;
    if (sim->lock_fd >= 0) close(sim->lock_fd);
    sim->lock_fd = -1;
}

/* ---- result files ---------------------------------------------------------- */

/* A plugin's result file is a stdio stream on a temporary file whose
 * writes go through this cookie, so the core sees every write error even
 * when the plugin does not check, and decides at the end whether the file
 * is moved into place. */
struct metro__output {
    metro__output *next;
    char *path, *tmp;
    FILE *f;
    int fd;
    int error;     /* first errno of a write, fsync or close */
    int closed;    /* the plugin closed it */
};

static ssize_t out_write(void *cookie, const char *buf, size_t n)
{
    metro__output *o = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!o->error) o->error = w < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static int out_close(void *cookie)
{
    metro__output *o = cookie;
    if (fsync(o->fd) != 0 && !o->error) o->error = errno;
    if (close(o->fd) != 0 && !o->error) o->error = errno;
    o->fd = -1;
    o->closed = 1;
    return o->error ? -1 : 0;
}

/* Every file of a run directory has one writer.  Two observables of one
 * plugin are refused at the start when the parameters that name their
 * files agree (sim.c); this catches the rest (a name given as the other's
 * default, a plugin naming a file after the core's) when it is first
 * opened, before anything is committed. */
static const char *const core_files[] = {"config.ini", "log.txt", "checkpoint.bin", "checkpoint.bin.prev",
                                         "gnuplot.log", NULL};

const char *metro__core_file(const char *filename)
{
    for (int i = 0; core_files[i]; ++i)
        if (!strcmp(filename, core_files[i]))
            return "the core's own file in the run directory (config.ini, log.txt, checkpoint.bin and .prev, "
                   "gnuplot.log)";
    const size_t l = strlen(filename);
    if (l >= 4 && !strcmp(filename + l - 4, ".tmp"))
        return "a temporary's name (a run's start removes every *.tmp in its directory)";
    return NULL;
}

/* trajectories append from their writer threads (observables/trajectory),
 * one a section, so claims are made under a lock */
static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;

static int claim_locked(metro_ctx *ctx, const char *filename, int opening);

int metro__output_claim(metro_ctx *ctx, const char *filename, int opening)
{
    if (!filename || !filename[0] || strchr(filename, '/') || filename[0] == '.') {
        snprintf(ctx->err, sizeof ctx->err, "'%s' is not a plain file name", filename ? filename : "");
        return -1;
    }
    pthread_mutex_lock(&claims_lock);
    const int rc = claim_locked(ctx, filename, opening);
    pthread_mutex_unlock(&claims_lock);
    return rc;
}

static int claim_locked(metro_ctx *ctx, const char *filename, int opening)
{
    metro_sim *sim = ctx->sim;
    /* the run directory is made after every create() has passed (nothing
     * is written before everything is valid): a file opened there would
     * have nowhere to go; create() names its files ahead instead */
    if (opening && sim->creating) {
        snprintf(ctx->err, sizeof ctx->err, "'%s' opened in create(): result files are opened in measure() or "
                                            "finish(), once the run directory exists (a plugin bug)", filename);
        return -1;
    }
    const char *why = metro__core_file(filename);
    if (why) {
        snprintf(ctx->err, sizeof ctx->err, "'%s' is %s: give another name", filename, why);
        return -1;
    }
    for (int i = 0; i < sim->nclaims; ++i)
        if (!strcmp(sim->claims[i], filename)) {
            if (!strcmp(sim->claim_owner[i], ctx->section)) return 0;
            snprintf(ctx->err, sizeof ctx->err, "'%s' is written by [%s] already: two sections cannot write one file "
                                                "(give one of them another file name)", filename, sim->claim_owner[i]);
            return -1;
        }
    sim->claims = metro__xrealloc(sim->claims, sizeof *sim->claims * (size_t)(sim->nclaims + 1));
    sim->claim_owner = metro__xrealloc(sim->claim_owner, sizeof *sim->claim_owner * (size_t)(sim->nclaims + 1));
    sim->claims[sim->nclaims] = metro__strdup(filename);
    sim->claim_owner[sim->nclaims++] = metro__strdup(ctx->section);
    return 0;
}

void metro__output_claims_free(metro_sim *sim)
{
    for (int i = 0; i < sim->nclaims; ++i) free(sim->claims[i]), free(sim->claim_owner[i]);
    free(sim->claims);
    free(sim->claim_owner);
    sim->claims = sim->claim_owner = NULL;
    sim->nclaims = 0;
}

FILE *metro__output_open(metro_ctx *ctx, const char *filename)
{
    metro_sim *sim = ctx->sim;
    if (metro__output_claim(ctx, filename, 1)) return NULL;
    if (!sim->dir) return fopen("/dev/null", "w");
    metro__output *o = metro__xcalloc(1, sizeof *o);
    size_t l = strlen(sim->dir) + strlen(filename) + 8;
    o->path = metro__xmalloc(l);
    o->tmp = metro__xmalloc(l);
    snprintf(o->path, l, "%s/%s", sim->dir, filename);
    snprintf(o->tmp, l, "%s.tmp", o->path);
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        snprintf(ctx->err, sizeof ctx->err, "%s: cannot be written: %s", o->path, strerror(errno));
        free(o->path), free(o->tmp), free(o);
        return NULL;
    }
    cookie_io_functions_t io = {.write = out_write, .close = out_close};
    o->f = fopencookie(o, "w", io);
    if (!o->f) {
        snprintf(ctx->err, sizeof ctx->err, "%s: cannot be written: %s", o->path, strerror(errno));
        close(o->fd), unlink(o->tmp);
        free(o->path), free(o->tmp), free(o);
        return NULL;
    }
    o->next = sim->outputs;
    sim->outputs = o;
    return o->f;
}

void metro__plot_request(metro_ctx *ctx, const char *script)
{
    metro_sim *sim = ctx->sim;
    if (!sim->dir || strchr(script, '/') || strchr(script, '\'') || script[0] == '.') return;
    sim->plots = metro__xrealloc(sim->plots, sizeof *sim->plots * (size_t)(sim->nplots + 1));
    sim->plots[sim->nplots++] = metro__strdup(script);
}

void metro__plots_run(metro_sim *sim)
{
    int have = sim->nplots && system("command -v gnuplot >/dev/null 2>&1") == 0;
    if (sim->nplots && !have)
        metro__log(sim, METRO_LOG_WARN, "gnuplot is not on PATH: no plots (run the .gp scripts in %s later)", sim->dir);
    for (int i = 0; i < sim->nplots; ++i) {
        char cmd[4600];
        snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s' >>gnuplot.log 2>&1", sim->dir, sim->plots[i]);
        if (have && system(cmd) != 0)
            metro__log(sim, METRO_LOG_WARN, "gnuplot %s failed: see gnuplot.log in the run directory", sim->plots[i]);
        free(sim->plots[i]);
    }
    free(sim->plots);
    sim->plots = NULL;
    sim->nplots = 0;
}

static void free_outputs(metro_sim *sim, int unlink_tmp)
{
    for (metro__output *o = sim->outputs, *next; o; o = next) {
        next = o->next;
        if (!o->closed) fclose(o->f);
        if (unlink_tmp) unlink(o->tmp);
        free(o->path), free(o->tmp), free(o);
    }
    sim->outputs = NULL;
}

int metro__outputs_commit(metro_sim *sim, metro_error *err)
{
    int rc = METRO_OK;
    for (metro__output *o = sim->outputs; o; o = o->next) {
        if (!o->closed) fclose(o->f); /* a plugin that forgot: its data still counts */
        o->closed = 1;
        if (o->error)
            rc = metro__fail(err, METRO_ERUN, "%s: cannot be written: %s; the results of this run are not written "
                                              "(earlier ones, if any, are kept)", o->path, strerror(o->error));
    }
    for (metro__output *o = sim->outputs; o && !rc; o = o->next)
        if (rename(o->tmp, o->path) != 0)
            rc = metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", o->path, strerror(errno));
    if (!rc && sim->dir) sync_dir(sim->dir);
    free_outputs(sim, rc != METRO_OK);
    return rc;
}

void metro__outputs_report(metro_sim *sim, metro_error *err)
{
    for (metro__output *o = sim->outputs; o; o = o->next) {
        if (!o->closed) fclose(o->f);
        o->closed = 1;
        if (o->error) metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", o->path, strerror(o->error));
    }
}

void metro__outputs_discard(metro_sim *sim)
{
    free_outputs(sim, 1);
    for (int i = 0; i < sim->nplots; ++i) free(sim->plots[i]);
    free(sim->plots);
    sim->plots = NULL;
    sim->nplots = 0;
}
