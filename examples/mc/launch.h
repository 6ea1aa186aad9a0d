/*
 * launch.h - how a floe-mc process was started: by hand (--workers W, or
 * --worker i/W on each host), or as one rank of a cluster launcher's job
 * (mpirun, srun).  Under a launcher every process is one worker: its rank
 * and the job's size come from the launcher; built with MPI (FLOE_MC_MPI:
 * `make` does it where mpicc is), the table's name, the start barrier and
 * the final counts go through MPI and rank 0 reports the whole run.  Built
 * without it, the rank and size come from the launcher's environment and
 * each rank reports its own share, as with --worker i/W.
 */
#ifndef FLOE_MC_LAUNCH_H
#define FLOE_MC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

typedef enum mc_launcher {
    MC_LAUNCH_NONE, /* started by hand */
    MC_LAUNCH_ENV,  /* a launcher's environment, and no MPI in this build (or none under this launcher) */
    MC_LAUNCH_MPI   /* MPI_Init ran: barrier, broadcast and gather work */
} mc_launcher;

typedef struct mc_launch {
    mc_launcher how;
    const char *by; /* "mpirun", "srun", ... */
    unsigned rank, size;
} mc_launch;

/* Whether floe-mc was built with MPI. */
int mc_launch_has_mpi(void);

/* Finds out how this process was started, and under a launcher with MPI
 * built in, initialises MPI.  0, or -1 with why in err (a launcher's
 * environment that does not add up). */
int mc_launch_init(mc_launch *l, int *argc, char ***argv, char *err, size_t len);

/* With MPI: waits for every rank (0); without: -1. */
int mc_launch_barrier(mc_launch *l);

/* With MPI: len bytes at buf from rank 0 to every rank (0); without: -1. */
int mc_launch_broadcast(mc_launch *l, void *buf, size_t len);

/* With MPI: every rank's n counts to rank 0, into all (size x n, rank by
 * rank; only rank 0's is written) (0); without: -1. */
int mc_launch_gather(mc_launch *l, const uint64_t *mine, unsigned n, uint64_t *all);

/* With MPI: ends every rank of the job with code (a rank that failed: the
 * run cannot be complete): under mpirun by exiting with it, which mpirun
 * answers by ending the job, else by MPI_Abort; without MPI it returns. */
void mc_launch_abort(mc_launch *l, int code);

/* With MPI: MPI_Finalize. */
void mc_launch_finish(mc_launch *l);

#endif
