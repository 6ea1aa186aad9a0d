/*
 * test_histogram.c - floe-bench's latency histogram (bench/histogram.c):
 * bucket geometry, percentiles against a sorted reference of random samples
 * within the stated precision, merging, min/max, the empty histogram.
 */
#include <math.h>
#include <stdlib.h>

#include "../../bench/histogram.h"
#include "testutil.h"

static histogram *new_hist(void)
{
    histogram *h = malloc(sizeof *h);
    ck_assert_ptr_nonnull(h);
    hist_reset(h);
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Log-uniform from 1 us to 100 s, in ns: every decade gets samples. */
static uint64_t sample(uint64_t *rng)
{
    double u = (double)(rng_next(rng) >> 11) * 0x1p-53;
    return (uint64_t)(1e3 * pow(10.0, 8.0 * u));
}

/* The reference's value at percentile p, with the histogram's rank rule. */
static uint64_t ref_percentile(const uint64_t *sorted, size_t n, double p)
{
    if (p <= 0)
        return sorted[0];
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

static const double PCTS[] = {0, 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};

START_TEST(test_buckets_tile_the_range)
{
    uint64_t prev_hi = 0;
    for (unsigned b = 0; b < HIST_BUCKETS; b++) {
        uint64_t lo, hi;
        hist_bucket_range(b, &lo, &hi);
        ck_assert_uint_le(lo, hi);
        if (b > 0)
            ck_assert_uint_eq(lo, prev_hi + 1); /* no gaps, no overlaps */
        ck_assert_uint_eq(hist_bucket(lo), b);
        ck_assert_uint_eq(hist_bucket(hi), b);
        if (lo > 0)
            ck_assert_msg((double)(hi - lo) / (double)lo <= 1.0 / 128, "bucket %u [%llu, %llu] too wide", b,
                          (unsigned long long)lo, (unsigned long long)hi);
        prev_hi = hi;
    }
    ck_assert_uint_ge(prev_hi, UINT64_C(100) * 1000000000); /* at least 100 s in ns */
    ck_assert_uint_eq(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
}
END_TEST

START_TEST(test_empty)
{
    histogram *h = new_hist();
    ck_assert_uint_eq(hist_count(h), 0);
    ck_assert_uint_eq(hist_min(h), 0);
    ck_assert_uint_eq(hist_max(h), 0);
    ck_assert(hist_mean(h) == 0);
    for (size_t i = 0; i < sizeof PCTS / sizeof PCTS[0]; i++)
        ck_assert_uint_eq(hist_percentile(h, PCTS[i]), 0);
    histogram *g = new_hist();
    hist_merge(g, h); /* merging nothing changes nothing */
    ck_assert_uint_eq(hist_count(g), 0);
    ck_assert_uint_eq(hist_min(g), 0);
    free(g);
    free(h);
}
END_TEST

START_TEST(test_small_values_exact)
{
    histogram *h = new_hist();
    for (uint64_t v = 1; v <= 200; v++)
        hist_record(h, v);
    ck_assert_uint_eq(hist_percentile(h, 50), 100);
    ck_assert_uint_eq(hist_percentile(h, 99), 198);
    ck_assert_uint_eq(hist_percentile(h, 0), 1);
    ck_assert_uint_eq(hist_percentile(h, 100), 200);
    ck_assert(fabs(hist_mean(h) - 100.5) < 1e-9);
    free(h);
}
END_TEST

START_TEST(test_percentiles_match_sorted_reference)
{
    const size_t n = 200000;
    uint64_t *v = malloc(n * sizeof *v), rng = 0x1234567u;
    ck_assert_ptr_nonnull(v);
    histogram *h = new_hist();
    for (size_t i = 0; i < n; i++) {
        v[i] = sample(&rng);
        hist_record(h, v[i]);
    }
    qsort(v, n, sizeof *v, cmp_u64);
    ck_assert_uint_eq(hist_count(h), n);
    ck_assert_uint_eq(hist_min(h), v[0]);
    ck_assert_uint_eq(hist_max(h), v[n - 1]);
    for (size_t i = 0; i < sizeof PCTS / sizeof PCTS[0]; i++) {
        uint64_t want = ref_percentile(v, n, PCTS[i]), got = hist_percentile(h, PCTS[i]);
        double err = fabs((double)got - (double)want) / (double)want;
        ck_assert_msg(err <= 0.01, "p%g: %llu, reference %llu (%.3f%% off)", PCTS[i], (unsigned long long)got,
                      (unsigned long long)want, 100 * err);
        ck_assert_msg(err <= 1.0 / 256 + 1e-9, "p%g: %.4f%% off, above half a bucket", PCTS[i], 100 * err);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    ck_assert(fabs(hist_mean(h) - sum / (double)n) <= 1e-6 * sum / (double)n);
    free(h);
    free(v);
}
END_TEST

START_TEST(test_merge_equals_one_histogram)
{
    enum { PARTS = 4, N = 50000 };
    histogram *parts[PARTS], *one = new_hist(), *merged = new_hist();
    for (int p = 0; p < PARTS; p++)
        parts[p] = new_hist();
    uint64_t rng = 99;
    for (int i = 0; i < N; i++) {
        /* each part its own range, so that min and max come from different parts */
        int p = i % PARTS;
        uint64_t x = sample(&rng) * (uint64_t)(p + 1);
        hist_record(parts[p], x);
        hist_record(one, x);
    }
    for (int p = 0; p < PARTS; p++)
        hist_merge(merged, parts[p]);
    ck_assert_uint_eq(hist_count(merged), N);
    ck_assert_uint_eq(hist_min(merged), hist_min(one));
    ck_assert_uint_eq(hist_max(merged), hist_max(one));
    for (unsigned b = 0; b < HIST_BUCKETS; b++)
        ck_assert_uint_eq(merged->counts[b], one->counts[b]);
    for (size_t i = 0; i < sizeof PCTS / sizeof PCTS[0]; i++)
        ck_assert_uint_eq(hist_percentile(merged, PCTS[i]), hist_percentile(one, PCTS[i]));
    ck_assert(fabs(hist_mean(merged) - hist_mean(one)) <= 1e-9 * hist_mean(one));
    for (int p = 0; p < PARTS; p++)
        free(parts[p]);
    free(one);
    free(merged);
}
END_TEST

START_TEST(test_min_max_exact_and_out_of_range)
{
    histogram *h = new_hist();
    hist_record(h, 123456789);
    ck_assert_uint_eq(hist_min(h), 123456789);
    ck_assert_uint_eq(hist_max(h), 123456789);
    /* one value: every percentile is it, exactly (clamped to [min, max]) */
    ck_assert_uint_eq(hist_percentile(h, 50), 123456789);
    ck_assert_uint_eq(hist_percentile(h, 99.9), 123456789);
    uint64_t huge = UINT64_C(1) << 50; /* beyond the range: last bucket, exact max */
    hist_record(h, huge);
    hist_record(h, 0);
    ck_assert_uint_eq(hist_min(h), 0);
    ck_assert_uint_eq(hist_max(h), huge);
    ck_assert_uint_eq(hist_percentile(h, 100), huge);
    ck_assert_uint_eq(hist_percentile(h, 0), 0);
    ck_assert_uint_eq(h->counts[HIST_BUCKETS - 1], 1);
    hist_reset(h);
    ck_assert_uint_eq(hist_count(h), 0);
    ck_assert_uint_eq(hist_max(h), 0);
    free(h);
}
END_TEST

Suite *histogram_suite(void)
{
    Suite *s = suite_create("histogram");
    TCase *tc = tcase_create("histogram");
    tcase_add_test(tc, test_buckets_tile_the_range);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_small_values_exact);
    tcase_add_test(tc, test_percentiles_match_sorted_reference);
    tcase_add_test(tc, test_merge_equals_one_histogram);
    tcase_add_test(tc, test_min_max_exact_and_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}
