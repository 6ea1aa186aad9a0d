/*
 * histogram.h - latency histograms for floe-bench: log-linear buckets in the
 * HdrHistogram style, fixed size, no allocation, mergeable.
 *
 * Values are nanoseconds (any unit works; floe-bench records ns and reports
 * microseconds).  Values below 2^HIST_SUB_BITS are counted exactly; above,
 * each power-of-two range [2^e, 2^(e+1)) is cut into 2^(HIST_SUB_BITS-1)
 * equal buckets, so a bucket is at most 1/128 of its values wide and the
 * value reported for it (its midpoint) is within 0.4% of every value it
 * holds.  The range ends at 2^HIST_MAX_BITS ns (about 18 minutes); larger
 * values land in the last bucket, and the exact maximum is kept apart.
 *
 * A histogram is about 35 KiB: one per thread and operation, merged at the
 * end (hist_merge), is the intended use.  Nothing here is thread-safe.
 */
#ifndef FLOE_BENCH_HISTOGRAM_H
#define FLOE_BENCH_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB_BITS 8  /* 256 exact values, then 128 buckets per power of two */
#define HIST_MAX_BITS 40 /* 2^40 ns = 1100 s */
#define HIST_HALF     (1u << (HIST_SUB_BITS - 1))
#define HIST_BUCKETS  ((HIST_MAX_BITS - HIST_SUB_BITS + 2) * HIST_HALF)

typedef struct histogram {
    uint64_t counts[HIST_BUCKETS];
    uint64_t total;
    uint64_t min, max; /* exact; min is UINT64_MAX while empty */
    double sum;        /* for the mean */
} histogram;

void hist_reset(histogram *h);
void hist_record(histogram *h, uint64_t value);
/* Adds every count of from into into. */
void hist_merge(histogram *into, const histogram *from);
/* The value at percentile p (0..100): the smallest recorded value's bucket
 * holding at least ceil(p% of total) values, reported as that bucket's
 * midpoint clamped to [min, max] (so p 0 is min and p 100 is max).  0 for
 * an empty histogram. */
uint64_t hist_percentile(const histogram *h, double p);
uint64_t hist_count(const histogram *h);
uint64_t hist_min(const histogram *h); /* 0 when empty */
uint64_t hist_max(const histogram *h); /* 0 when empty */
double hist_mean(const histogram *h);  /* 0 when empty */

/* The bucket a value falls in, and the range [lo, hi] of values it holds
 * (exposed for the tests). */
unsigned hist_bucket(uint64_t value);
void hist_bucket_range(unsigned bucket, uint64_t *lo, uint64_t *hi);

#endif
