/* core/src/frames.h — trajectory files: GSD (HOOMD-blue's binary format,
 * schema "hoomd") and extended XYZ (as ASE and OVITO read it), written a
 * frame at a time and read back (frames.c).
 *
 * Writing is stateless: the file on disk plus the caller's metro_frame_mark
 * say everything, so an observable's save()/restore() of its mark is all a
 * resumed run needs to continue the file exactly.
 */
#ifndef METRO__FRAMES_H
#define METRO__FRAMES_H

#include <stddef.h>

#include "metro/metro.h"
#include "metro/plugin.h"

typedef enum metro__frame_format {
    METRO__FRAMES_UNKNOWN = 0,
    METRO__FRAMES_GSD = 1,
    METRO__FRAMES_XYZ = 2
} metro__frame_format;

/* The format a file name's extension names (.gsd; .xyz, .extxyz). */
metro__frame_format metro__frames_format_of(const char *path);

/* Append frame to path (see host->frame_append); 0, or -1 with why in err. */
int metro__frames_append(const char *path, const metro_frame *frame, metro_frame_mark *mark, char *err,
                         size_t nerr);
/* Cut path back to *mark (see host->frame_truncate). */
int metro__frames_truncate(const char *path, const metro_frame_mark *mark, char *err, size_t nerr);

/* One frame read back.  type[i] indexes names (the file's own species
 * names: GSD particles/types, XYZ the metro_species column, else the
 * species column); charge and diameter are NULL when the file has none.
 * Every real is finite, positions within float's range.  GSD bonds
 * (bonds/group, as the file has them: nothing is checked but that they
 * are integers) where bonds/N > 0; bond types are not read.  Names are
 * the file's bytes: show them with metro__frames_shown. */
typedef struct metro__frame_in {
    long index;            /* which frame (0 = first) */
    long frames;           /* complete frames in the file */
    int particles;
    float *xyz;            /* [3 * particles] */
    int *type;             /* [particles] */
    double *charge;        /* [particles] or NULL */
    int ntypes;
    char (*names)[64];     /* [ntypes] */
    long long step;        /* sweep of the frame, -1 when not recorded */
    int explicit_types;    /* GSD: the frame (or frame 0) has particles/types */
    double *diameter;      /* [particles] or NULL (GSD particles/diameter) */
    long bonds;            /* GSD bonds/N; 0: no bonds */
    long long *bond;       /* [2 * bonds]: bonds/group, pair after pair */
    int partial_tail;      /* XYZ: an incomplete frame after the last one was ignored */
    metro__frame_format format; /* which format the file was read as */
} metro__frame_in;

/* Read frame `want` (0 first, -1 last, -2 the one before ...) of path,
 * GSD or extended XYZ by extension or else by content.  0, or -1 with a
 * message naming the file (and frame, line or chunk) in err. */
int metro__frames_read(const char *path, long want, metro__frame_in *out, char *err, size_t nerr);
/* metro__frames_read's status when the file is readable but has no frame
 * want (so that the message can name the key that asked for it) */
#define METRO__FRAMES_NO_FRAME (-2)
void metro__frame_in_free(metro__frame_in *f);
/* s fit for a message (a file's bytes may be binary or control codes):
 * printable ASCII as is, other bytes as \xNN, cut with "..." to n. */
const char *metro__frames_shown(const char *s, char *out, size_t n);

/* Tests only: make an append stop the process midway (see frames.c). */
extern int metro__frames_test_stop;

/* initial.c, before the terms' create() (compose.c's metro__system_read):
 * read the frame of [system] initial, once, where the system may need it
 * (always, but on a resume only when the species or chains may come from
 * it); a missing or unreadable file is refused here. */
int metro__initial_read(metro_sim *sim, int composed, metro_error *err);
/* [system] declares no species: in a composed system (several terms, or a
 * term restricted to species) the species of the GSD frame's
 * particles/types, each with the charge and diameter its particles agree
 * on, and their counts; sets particles (or checks it).  Nothing when the
 * frame has no particles/types or the run is a lone potential's. */
int metro__initial_species(metro_sim *sim, int composed, metro_error *err);
/* The frame's bonds (GSD bonds/group) as linear chains, refused unless
 * they are chains of index neighbours first in index order; taken as the
 * system's chains when [system] declares none, else checked against
 * them. */
int metro__initial_chains(metro_sim *sim, metro_error *err);
void metro__initial_free(metro_sim *sim);

/* initial.c: [system] initial = FILE.  Reads the frame initial_frame,
 * checks it against the potential (particle count, species, charges,
 * cell, hard cores, bonds, finite energy) and places it in every replica
 * of sim's state.  A refusal names the config key, the file, the frame and
 * the particle. */
int metro__initial_load(metro_sim *sim, metro_error *err);

#endif
