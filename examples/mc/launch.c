/*
 * launch.c - the cluster launcher a floe-mc process runs under (launch.h).
 *
 * A launcher says so in the environment of the processes it starts:
 * OpenMPI's mpirun sets OMPI_COMM_WORLD_RANK and _SIZE, MPICH's (and srun
 * with --mpi=pmi2) PMI_RANK and PMI_SIZE, a PMIx launcher PMIX_RANK, and
 * srun SLURM_PROCID with SLURM_STEP_NUM_TASKS (a batch script alone has no
 * step, so it is not mistaken for rank 0 of a job).  With MPI built in and
 * an MPI launcher's variables there, MPI_Init takes over and MPI says the
 * rank and size.
 */
#define _GNU_SOURCE
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FLOE_MC_MPI
#include <mpi.h>
#endif

int mc_launch_has_mpi(void)
{
#ifdef FLOE_MC_MPI
    return 1;
#else
    return 0;
#endif
}

/* A whole number from the environment: 1 and *out, 0 when unset, -1 when not a number. */
static int env_uint(const char *name, unsigned *out)
{
    const char *s = getenv(name);
    if (!s || !s[0])
        return 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v > 1u << 20)
        return -1;
    *out = (unsigned)v;
    return 1;
}

int mc_launch_init(mc_launch *l, int *argc, char ***argv, char *err, size_t len)
{
    static const struct {
        const char *rank, *size, *by;
        int mpi; /* an MPI launcher: MPI_Init works under it */
    } launchers[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun", 1},
        {"PMI_RANK", "PMI_SIZE", "mpirun (PMI)", 1},
        {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "srun", 0},
    };
    memset(l, 0, sizeof *l);
    l->size = 1;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        unsigned rank, size;
        const int r = env_uint(launchers[i].rank, &rank), s = env_uint(launchers[i].size, &size);
        if (r == 0 && s == 0)
            continue;
        if (r != 1 || s != 1 || size < 1 || rank >= size) {
            snprintf(err, len, "started by %s, but %s=%s and %s=%s are not a rank below a size", launchers[i].by,
                     launchers[i].rank, getenv(launchers[i].rank) ? getenv(launchers[i].rank) : "(unset)",
                     launchers[i].size, getenv(launchers[i].size) ? getenv(launchers[i].size) : "(unset)");
            return -1;
        }
        l->how = MC_LAUNCH_ENV;
        l->by = launchers[i].by;
        l->rank = rank;
        l->size = size;
#ifdef FLOE_MC_MPI
        /* srun starts MPI programs too when OpenMPI knows its PMI: a PMIx or PMI variable says so */
        if (launchers[i].mpi || getenv("PMIX_RANK") || getenv("PMI_FD")) {
            setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0); /* each rank forks its worker, which never calls MPI */
            int provided;
            if (MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
                snprintf(err, len, "started by %s, but MPI_Init failed", l->by);
                return -1;
            }
            int mr, ms;
            MPI_Comm_rank(MPI_COMM_WORLD, &mr);
            MPI_Comm_size(MPI_COMM_WORLD, &ms);
            l->how = MC_LAUNCH_MPI;
            l->rank = (unsigned)mr;
            l->size = (unsigned)ms;
        }
#else
        (void)argc, (void)argv;
#endif
        return 0;
    }
    return 0;
}

int mc_launch_barrier(mc_launch *l)
{
#ifdef FLOE_MC_MPI
    if (l->how == MC_LAUNCH_MPI)
        return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
#endif
    (void)l;
    return -1;
}

int mc_launch_broadcast(mc_launch *l, void *buf, size_t len)
{
#ifdef FLOE_MC_MPI
    if (l->how == MC_LAUNCH_MPI)
        return MPI_Bcast(buf, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
#endif
    (void)l, (void)buf, (void)len;
    return -1;
}

int mc_launch_gather(mc_launch *l, const uint64_t *mine, unsigned n, uint64_t *all)
{
#ifdef FLOE_MC_MPI
    if (l->how == MC_LAUNCH_MPI)
        return MPI_Gather(mine, (int)n, MPI_UINT64_T, all, (int)n, MPI_UINT64_T, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0
                                                                                                                   : -1;
#endif
    (void)l, (void)mine, (void)n, (void)all;
    return -1;
}

void mc_launch_abort(mc_launch *l, int code)
{
#ifdef FLOE_MC_MPI
    if (l->how == MC_LAUNCH_MPI) {
        fflush(NULL);
        /* mpirun ends the job when a rank exits with a failure before MPI_Finalize.  MPI_Abort does
         * too, but a shard that dies fails every rank at once, and OpenMPI 4.1's mpirun garbles the
         * help messages of several aborts ("Data unpack would read past end of buffer") and may hang
         * or crash.  Other launchers (srun) need MPI_Abort to end the ranks waiting for this one. */
        if (strcmp(l->by, "mpirun") == 0)
            _exit(code);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
#endif
    (void)l, (void)code;
}

void mc_launch_finish(mc_launch *l)
{
#ifdef FLOE_MC_MPI
    if (l->how == MC_LAUNCH_MPI)
        MPI_Finalize();
#endif
    (void)l;
}
