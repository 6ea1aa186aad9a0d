/*
 * histogram.c - log-linear latency histograms (see histogram.h).
 *
 * Bucket of v: below 2^HIST_SUB_BITS, v itself.  Above, with s = msb(v) -
 * (HIST_SUB_BITS - 1), the bucket is s * HIST_HALF + (v >> s): v >> s lies in
 * [HIST_HALF, 2 * HIST_HALF), so each shift owns HIST_HALF consecutive
 * buckets right after the previous shift's, and a bucket is 2^s values wide
 * for values of at least 2^(s + HIST_SUB_BITS - 1): relative width <= 1/128.
 */
#include "histogram.h"

#include <math.h>
#include <string.h>

void hist_reset(histogram *h)
{
    memset(h->counts, 0, sizeof h->counts);
    h->total = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = 0;
}

unsigned hist_bucket(uint64_t v)
{
    if (v < (1u << HIST_SUB_BITS))
        return (unsigned)v;
    if (v >> HIST_MAX_BITS)
        v = (UINT64_C(1) << HIST_MAX_BITS) - 1;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - (HIST_SUB_BITS - 1);
    return shift * HIST_HALF + (unsigned)(v >> shift);
}

void hist_bucket_range(unsigned b, uint64_t *lo, uint64_t *hi)
{
    if (b < (1u << HIST_SUB_BITS)) {
        *lo = *hi = b;
        return;
    }
    unsigned shift = b / HIST_HALF - 1;
    uint64_t m = b - shift * HIST_HALF;
    *lo = m << shift;
    *hi = *lo + (UINT64_C(1) << shift) - 1;
}

void hist_record(histogram *h, uint64_t v)
{
    h->counts[hist_bucket(v)]++;
    h->total++;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->sum += (double)v;
}

void hist_merge(histogram *into, const histogram *from)
{
    if (!from->total)
        return;
    for (unsigned b = 0; b < HIST_BUCKETS; b++)
        into->counts[b] += from->counts[b];
    into->total += from->total;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    into->sum += from->sum;
}

uint64_t hist_percentile(const histogram *h, double p)
{
    if (!h->total)
        return 0;
    if (!(p > 0)) /* also NaN */
        return h->min;
    if (p >= 100)
        return h->max;
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->total);
    if (rank < 1)
        rank = 1;
    if (rank > h->total)
        rank = h->total;
    uint64_t seen = 0;
    for (unsigned b = 0; b < HIST_BUCKETS; b++) {
        seen += h->counts[b];
        if (seen >= rank) {
            uint64_t lo, hi;
            hist_bucket_range(b, &lo, &hi);
            uint64_t mid = lo + (hi - lo) / 2;
            return mid < h->min ? h->min : mid > h->max ? h->max : mid;
        }
    }
    return h->max;
}

uint64_t hist_count(const histogram *h)
{
    return h->total;
}

uint64_t hist_min(const histogram *h)
{
    return h->total ? h->min : 0;
}

uint64_t hist_max(const histogram *h)
{
    return h->total ? h->max : 0;
}

double hist_mean(const histogram *h)
{
    return h->total ? h->sum / (double)h->total : 0;
}
