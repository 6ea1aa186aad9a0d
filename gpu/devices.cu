/*
 * devices.cu - the GPU backend's devices: the pinned host memory it
 * registered (so that a copy can go straight from it), which device is
 * current for a call (device_scope), and whether each device still works
 * (a sticky error ruins its context for good).
 */
#include "pipeline.h"

/* The pinned host memory handed out by floe_backend_host_alloc, by every
 * GPU backend of the process (it is portable: any device's copies may use
 * it): looked up here instead of asking the driver, which costs a few
 * microseconds a call, four calls a piece. */
struct pinned_range {
    uintptr_t start, end;
};
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned_range *pinned_ranges; /* sorted by start, disjoint */
static size_t pinned_n, pinned_cap;

bool pinned_add(const void *p, size_t bytes)
{
    pthread_mutex_lock(&pinned_lock);
    bool ok = pinned_n < pinned_cap;
    if (!ok) {
        size_t cap = pinned_cap ? 2 * pinned_cap : 64;
        pinned_range *grown = (pinned_range *)realloc(pinned_ranges, cap * sizeof *grown);
        if ((ok = grown != NULL)) {
            pinned_ranges = grown;
            pinned_cap = cap;
        }
    }
    if (ok) {
        const uintptr_t start = (uintptr_t)p;
        size_t at = pinned_n;
        while (at > 0 && pinned_ranges[at - 1].start > start)
            at--;
        memmove(pinned_ranges + at + 1, pinned_ranges + at, (pinned_n - at) * sizeof *pinned_ranges);
        pinned_ranges[at].start = start;
        pinned_ranges[at].end = start + bytes;
        pinned_n++;
    }
    pthread_mutex_unlock(&pinned_lock);
    return ok;
}

void pinned_remove(const void *p)
{
    pthread_mutex_lock(&pinned_lock);
    for (size_t i = 0; i < pinned_n; i++)
        if (pinned_ranges[i].start == (uintptr_t)p) {
            memmove(pinned_ranges + i, pinned_ranges + i + 1, (pinned_n - i - 1) * sizeof *pinned_ranges);
            pinned_n--;
            break;
        }
    pthread_mutex_unlock(&pinned_lock);
}

/* Whether [p, p + bytes) lies in pinned memory of floe_backend_host_alloc. */
bool pinned(const void *p, size_t bytes)
{
    if (!p)
        return false;
    const uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&pinned_lock);
    size_t lo = 0, hi = pinned_n; /* the last range that starts at or before a */
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (pinned_ranges[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    const bool in = lo > 0 && a + bytes <= pinned_ranges[lo - 1].end;
    pthread_mutex_unlock(&pinned_lock);
    return in;
}

/* ---- devices: whose is current, and whether each still works --------------------------------------
 * cudaSetDevice is per thread.  A lane's thread makes its table's device
 * current once, then runs its callers' done() functions, which may call
 * into another backend (floed's batcher allocates the next batch's pinned
 * buffers there, on the first part's device); and floed's io threads call
 * host_alloc and meminfo for any device.  So the functions of this file
 * that other threads call keep the caller's device (device_scope), and a
 * lane makes its own current again after every done() (complete).  A lane
 * of a part on device 1 that went on with device 0 current allocated its
 * next scratch on device 0 and faulted there (an illegal address). */

typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);
static ctx_get_fn ctx_get;
static ctx_set_fn ctx_set;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void ctx_init(void)
{
    void *g = NULL, *s = NULL;
    cudaDriverEntryPointQueryResult q1, q2;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &g, 4000, cudaEnableDefault, &q1) == cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &s, 4000, cudaEnableDefault, &q2) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess && q2 == cudaDriverEntryPointSuccess) {
        ctx_get = (ctx_get_fn)g;
        ctx_set = (ctx_set_fn)s;
    }
    cudaGetLastError();
}

/* Makes `device` current for the scope's life, then gives the thread back
 * the context it had (none, if it had none: cudaSetDevice to a remembered
 * device would create one on a device floed was not asked to use). */
device_scope::device_scope(int device)
{
    pthread_once(&ctx_once, ctx_init);
    restore = ctx_get && ctx_get(&saved) == CUDA_SUCCESS;
    e = cudaSetDevice(device);
}

device_scope::~device_scope()
{
    if (restore)
        ctx_set(saved);
}

#define GPU_DEVICES 64 /* devices whose health is kept; a device id past it is never marked failed */

/* A device whose context a sticky error has ruined: every later CUDA call
 * on it fails, for the rest of the process. */
struct device_health {
    int failed;               /* __atomic; set once, after why */
    unsigned fault_in;        /* __atomic; tests: the batch that faults on purpose, counted down (0: none) */
    char why[FLOE_ERROR_MAX]; /* CUDA's message and the table that met it first */
};
static device_health health[GPU_DEVICES];
static pthread_mutex_t health_lock = PTHREAD_MUTEX_INITIALIZER;

/* Errors after which the context cannot be used again (CUDA's "sticky"
 * errors: the process must end to use the device again). */
bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorDevicesUnavailable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
        return true;
    default:
        return false;
    }
}

/* floe_gpu_set_budget's: set before any table runs, read by the lanes. */
static bool (*budget_fits)(int device, uint64_t bytes);

extern "C" void floe_gpu_set_budget(bool (*fits)(int device, uint64_t bytes))
{
    budget_fits = fits;
}

bool device_budget_fits(int device, uint64_t bytes)
{
    return !budget_fits || budget_fits(device, bytes);
}

bool device_failed(int device)
{
    return device >= 0 && device < GPU_DEVICES && __atomic_load_n(&health[device].failed, __ATOMIC_ACQUIRE);
}

/* The status of a request that needs a failed device. */
floe_status unavailable(int device, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_UNAVAILABLE,
                            "GPU %d has failed (%s): its tables cannot be used until the server restarts", device,
                            health[device].why);
}

/* Records that device failed with e (found as `how` says), the first time. */
void mark_failed(int device, cudaError_t e, const char *how)
{
    pthread_mutex_lock(&health_lock);
    if (!health[device].failed) {
        snprintf(health[device].why, sizeof health[device].why, "%s, %s", cudaGetErrorString(e), how);
        __atomic_store_n(&health[device].failed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&health_lock);
}

/* After a CUDA failure on `device` (current): whether its context is gone,
 * recorded (with the table that met it) the first time. */
static bool device_check(int device, const char *table)
{
    if (device < 0 || device >= GPU_DEVICES)
        return false;
    if (device_failed(device))
        return true;
    const cudaError_t e = cudaDeviceSynchronize(); /* a failure's path: waiting costs nothing that matters */
    if (!sticky(e)) {
        cudaGetLastError();
        return false;
    }
    char how[FLOE_NAME_MAX + 32];
    snprintf(how, sizeof how, "first met by table %s", table && *table ? table : "(none)");
    mark_failed(device, e, how);
    return true;
}

/* A failed operation's status: FLOE_ERR_UNAVAILABLE if its device's context
 * is gone (whatever the call that met it said: a cudaMalloc then reads as
 * out of memory), else st as it was. */
floe_status device_status(int device, const char *table, floe_status st, floe_errinfo *err)
{
    if ((st == FLOE_ERR_INTERNAL || st == FLOE_ERR_FULL) && device_check(device, table))
        return unavailable(device, err);
    return st;
}

/* Tests: a store through an address no allocation covers, as a bug would make. */
__global__ void k_fault(unsigned *p)
{
    *p = 1;
}

/* Whether the batch now begun on `device` is the one armed to fault (floe_gpu_fault_arm). */
static bool fault_due(int device)
{
    if (device < 0 || device >= GPU_DEVICES)
        return false;
    unsigned n = __atomic_load_n(&health[device].fault_in, __ATOMIC_RELAXED);
    while (n > 0 && !__atomic_compare_exchange_n(&health[device].fault_in, &n, n - 1, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
    }
    return n == 1;
}

/* Tests: before the batch armed to fault (floe_gpu_fault_arm), a kernel on
 * stream that faults. */
void fault_if_due(int device, cudaStream_t stream)
{
    if (fault_due(device))
        k_fault<<<1, 1, 0, stream>>>((unsigned *)(uintptr_t)16);
}

/* Asks the driver whether `device`'s context still works (a query that
 * waits for nothing): a sticky error met elsewhere, or on a device none of
 * whose tables has run since, is found here, and recorded. */
static void device_probe(int device)
{
    device_scope on(device);
    const cudaError_t e = on.e != cudaSuccess ? on.e : cudaStreamQuery(0);
    if (!sticky(e)) {
        cudaGetLastError();
        return;
    }
    mark_failed(device, e, "found by a health check");
}

extern "C" int floe_gpu_healthy(int device, char *why, size_t len)
{
    if (device < 0 || device >= GPU_DEVICES || device >= floe_gpu_count())
        return -1;
    if (!device_failed(device))
        device_probe(device);
    const bool failed = device_failed(device);
    if (why && len)
        snprintf(why, len, "%s", failed ? health[device].why : "");
    return failed ? 0 : 1;
}

extern "C" void floe_gpu_fault_arm(int device, unsigned after)
{
    if (device >= 0 && device < GPU_DEVICES)
        __atomic_store_n(&health[device].fault_in, after, __ATOMIC_RELAXED);
}

/* Peer access between devices (a table in parts split on its devices:
 * run_group.cu): whether each pair can, asked once, and whether `from`
 * has it to `to` yet (cudaDeviceEnablePeerAccess: once a pair for the
 * process). */
#define PEERS_MAX 64
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_can[PEERS_MAX][PEERS_MAX]; /* 0: not asked, 1: yes, -1: no */
static bool peer_on[PEERS_MAX][PEERS_MAX];

bool peer_reach(int from, int to)
{
    if (from == to)
        return true;
    if (from < 0 || to < 0 || from >= PEERS_MAX || to >= PEERS_MAX)
        return false;
    pthread_mutex_lock(&peer_lock);
    if (peer_can[from][to] == 0) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess) {
            cudaGetLastError();
            can = 0;
        }
        peer_can[from][to] = can ? 1 : -1;
    }
    const bool can = peer_can[from][to] > 0;
    pthread_mutex_unlock(&peer_lock);
    return can;
}

floe_status peer_open(int from, int to, floe_errinfo *err)
{
    if (from == to)
        return FLOE_OK;
    if (!peer_reach(from, to))
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "GPU %d cannot reach GPU %d's memory", from, to);
    pthread_mutex_lock(&peer_lock);
    floe_status st = FLOE_OK;
    if (!peer_on[from][to]) {
        device_scope on(from);
        cudaError_t e = on.e == cudaSuccess ? cudaDeviceEnablePeerAccess(to, 0) : on.e;
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();
            e = cudaSuccess;
        }
        if (e == cudaSuccess)
            peer_on[from][to] = true;
        else
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "peer access from GPU %d to GPU %d: %s", from, to,
                                  cuda_msg(e));
    }
    pthread_mutex_unlock(&peer_lock);
    return st;
}
