#!/usr/bin/python3
"""check_metrics.py - scrapes floed's /metrics and checks it with an
independent parser (Debian's python3-prometheus-client).

usage: check_metrics.py URL [--quiescent] [--exact NAME ...] [EXPECT ...]

EXPECT is NAME{label=value,...}=NUMBER (or >=NUMBER): the sample must be
there with that value.  --exact NAME: every sample called NAME that is not
expected must be 0 (so that no unexpected error series slips through).
--quiescent: every request has been answered, so each operation's latency
histogram counts exactly its floe_requests_total.

Always checked: HTTP 200 with the Prometheus text content type, HELP and
TYPE for every family, histogram buckets cumulative with +Inf equal to
_count.  Exit 0 when all holds, 1 with the reasons on stdout, 77 when the
parser is missing (apt-get install python3-prometheus-client).
"""
import math
import re
import sys
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("python3-prometheus-client is missing (make deps, or apt-get install python3-prometheus-client)")
    sys.exit(77)

EXPECT = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?(>=|=)(.+)$")


def parse_expect(text):
    m = EXPECT.match(text)
    if not m:
        raise SystemExit("bad expectation: " + text)
    name, labels, op, value = m.groups()
    lab = {}
    if labels:
        for pair in labels.split(","):
            k, v = pair.split("=", 1)
            lab[k] = v
    return name, frozenset(lab.items()), op, float(value)


def main(argv):
    url, args = argv[1], argv[2:]
    quiescent, exact, expects = False, set(), []
    i = 0
    while i < len(args):
        if args[i] == "--quiescent":
            quiescent = True
        elif args[i] == "--exact":
            i += 1
            exact.add(args[i])
        else:
            expects.append(parse_expect(args[i]))
        i += 1

    with urllib.request.urlopen(url, timeout=20) as r:
        status, ctype, body = r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")
    bad = []
    if status != 200:
        bad.append("HTTP status %d" % status)
    if not ctype.startswith("text/plain; version=0.0.4"):
        bad.append("content type %r" % ctype)

    samples = {}  # (name, labels) -> value
    hist = {}  # (family, labels without le) -> {"buckets": [(le, v)], "count": v, "sum": v}
    for fam in text_string_to_metric_families(body):
        if not fam.documentation:
            bad.append("family %s has no HELP" % fam.name)
        if fam.type == "unknown":
            bad.append("family %s has no TYPE" % fam.name)
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            if key in samples:
                bad.append("sample %s%s appears twice" % (s.name, s.labels))
            samples[key] = s.value
            if fam.type == "histogram":
                rest = frozenset((k, v) for k, v in s.labels.items() if k != "le")
                h = hist.setdefault((fam.name, rest), {"buckets": [], "count": None, "sum": None})
                if s.name.endswith("_bucket"):
                    h["buckets"].append((float(s.labels["le"]), s.value))
                elif s.name.endswith("_count"):
                    h["count"] = s.value
                elif s.name.endswith("_sum"):
                    h["sum"] = s.value

    for (fam, labels), h in hist.items():
        where = "%s%s" % (fam, dict(labels))
        b = sorted(h["buckets"])
        if not b or not math.isinf(b[-1][0]):
            bad.append("%s: no +Inf bucket" % where)
            continue
        for (le0, v0), (le1, v1) in zip(b, b[1:]):
            if v1 < v0:
                bad.append("%s: bucket le=%g (%g) below le=%g (%g): not cumulative" % (where, le1, v1, le0, v0))
        if h["count"] is None or h["count"] != b[-1][1]:
            bad.append("%s: _count %s differs from the +Inf bucket %g" % (where, h["count"], b[-1][1]))
        if h["sum"] is None or h["sum"] < 0:
            bad.append("%s: _sum %s" % (where, h["sum"]))
        if quiescent and fam == "floe_request_duration_seconds":
            op = dict(labels).get("op")
            req = samples.get(("floe_requests_total", frozenset({("op", op)})))
            if req != h["count"]:
                bad.append("%s: %s answered, floe_requests_total says %s" % (where, h["count"], req))
    if quiescent:
        for (name, labels), v in samples.items():
            if name == "floe_requests_total" and v:
                op = dict(labels)["op"]
                if ("floe_request_duration_seconds", labels) not in hist:
                    bad.append("op %s: %g requests but no latency histogram" % (op, v))

    expected = set()
    for name, labels, op, value in expects:
        expected.add((name, labels))
        got = samples.get((name, labels))
        shown = "%s{%s}" % (name, ",".join("%s=%s" % kv for kv in sorted(labels)))
        if got is None:
            bad.append("%s: missing (want %s%g)" % (shown, op, value))
        elif (op == "=" and got != value) or (op == ">=" and got < value):
            bad.append("%s: %g, want %s%g" % (shown, got, op, value))
    for (name, labels), v in samples.items():
        if name in exact and (name, labels) not in expected and v != 0:
            bad.append("%s%s: %g, not expected" % (name, dict(labels), v))

    if bad:
        print("\n".join(bad))
        print("---- the scrape ----")
        print(body)
        return 1
    print("ok: %d samples, %d histograms" % (len(samples), len(hist)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
