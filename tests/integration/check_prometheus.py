#!/usr/bin/python3
"""check_prometheus.py - floed's /metrics as a real Prometheus sees it.

usage: check_prometheus.py URL QUERY=NUMBER [DASHBOARD]

First Debian's `promtool check metrics` lints the page at URL (any
complaint fails).  Then a Prometheus server (Debian's `prometheus`) is
started on a free port of 127.0.0.1 with a data directory of its own,
scraping URL every second, and its HTTP API is asked QUERY (PromQL, such
as floe_requests_total{op="insert"}) until the one sample it answers has
the value NUMBER (30 s at most); then every query of the Grafana
dashboard DASHBOARD (docs/grafana/floed-dashboard.json) must run there
without an error, its variables given their widest values; the server is
stopped.

Exit 0 when all holds, 1 with the reasons on stdout, 77 when promtool or
prometheus is missing (apt-get install prometheus).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request


def fail(msg):
    print(msg)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lint(url):
    page = urllib.request.urlopen(url, timeout=10).read()
    r = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode(errors="replace").strip()
    if r.returncode != 0 or out:
        fail("promtool check metrics (exit %d): %s" % (r.returncode, out or "(nothing said)"))


def query(port, q):
    """The samples Prometheus answers q with; None while it is not up yet."""
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(q))
    try:
        body = json.loads(urllib.request.urlopen(url, timeout=5).read())
    except urllib.error.HTTPError as e:  # it is up, and refuses the query
        fail("query %s: HTTP %d: %s" % (q, e.code, e.read().decode(errors="replace")))
    except OSError:
        return None
    if body.get("status") != "success":
        fail("query %s: %s" % (q, body))
    return body["data"]["result"]


def dashboard_queries(path):
    with open(path) as f:
        dash = json.load(f)
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"].replace("$instance", ".*").replace("$__rate_interval", "1m")


def main():
    if len(sys.argv) not in (3, 4) or "=" not in sys.argv[2]:
        raise SystemExit(__doc__)
    url = sys.argv[1]
    dashboard = sys.argv[3] if len(sys.argv) == 4 else None
    q, want = sys.argv[2].rsplit("=", 1)
    want = float(want)
    for tool in ("promtool", "prometheus"):
        if not shutil.which(tool):
            print("%s is missing (make deps, or apt-get install prometheus)" % tool)
            sys.exit(77)
    lint(url)

    target = urllib.parse.urlparse(url)
    port = free_port()
    d = tempfile.mkdtemp(prefix="floe-prom.")
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: floed\n"
                "    metrics_path: %s\n    static_configs:\n      - targets: ['%s']\n" % (target.path, target.netloc))
    log = open(os.path.join(d, "prometheus.log"), "w")
    p = subprocess.Popen(["prometheus", "--config.file=" + os.path.join(d, "prometheus.yml"),
                          "--storage.tsdb.path=" + os.path.join(d, "data"),
                          "--web.listen-address=127.0.0.1:%d" % port],
                         stdout=log, stderr=subprocess.STDOUT)
    got = None
    try:
        deadline = time.time() + 30
        while got != want and time.time() < deadline and p.poll() is None:
            res = query(port, q)
            if res:
                if len(res) != 1:
                    fail("%s: %d samples, wanted one: %s" % (q, len(res), res))
                got = float(res[0]["value"][1])
            if got != want:
                time.sleep(0.5)
        if got == want and dashboard:
            for title, expr in dashboard_queries(dashboard):
                if query(port, expr) is None:
                    fail("dashboard panel '%s': no answer to %s" % (title, expr))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        with open(os.path.join(d, "prometheus.log")) as f:
            tail = f.read()[-2000:]
        shutil.rmtree(d, ignore_errors=True)
    if got == want:
        return
    fail("prometheus never read %s = %g from %s (last: %s); its log ends:\n%s" % (q, want, url, got, tail))


main()
