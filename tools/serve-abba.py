#!/usr/bin/env python3
"""serve-abba: two servers under the same load, interleaved A B B A, with receipts.

usage: serve-abba.py -a 'CMD A' -b 'CMD B' --port-a P --port-b Q [--blocks N]
                     [--bench 'ARGS for serve-bench.py'] [--tsv F --log F]
                     [--model M --quant Q --peer NAME --binary NAME --ctx N]
                     [--client SCRIPT --bench-b 'B's ARGS' --scenario PREFIX]

--client runs another load than serve-bench.py (tools/serve-turns.py's
shared and idturns modes: one JSON line with "c" and figures), with B's
own arguments by --bench-b (another API: llama-server's /completion);
--scenario names the rows (default serve: serve-cN...).
Each run starts one server (its command, in the background, until /health
answers 200; refused when something already listens on its port), runs
tools/serve-bench.py against it at every concurrency, then stops it and
waits until its processes are gone and its port closed (also when
serve-abba itself is stopped by SIGTERM or SIGHUP); the order is A B B A, --blocks times (the log has the load average
at each run's start and end).  Prints, per concurrency and
figure, A's median/min/max, B's median and A/B.  With --tsv, one row a
(concurrency, figure) in DESIGN.md's columns (A is the binary, B the peer):
scenario serve-cN (aggregate tok/s), serve-cN-stream (per-stream tok/s),
serve-cN-ttft-p50/-p99 and serve-cN-itl-p50/-p99 (ms), and with one
concurrency a run serve-cN-cpu-s: the CPU seconds (user + system,
/proc/PID/stat) of the server command's processes over the bench, a figure
that other load on a shared machine moves less than wall time; MEMRA_COMMIT
names the
commit when set (a device copy's .git may be stale); every server's stderr and every
bench line go to --log.
"""
import argparse
import datetime
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

FIGS = (("agg_tok_s", "", "tok/s"), ("stream_tok_s", "-stream", "tok/s"),
        ("ttft_p50_ms", "-ttft-p50", "ms"), ("ttft_p99_ms", "-ttft-p99", "ms"),
        ("itl_p50_ms", "-itl-p50", "ms"), ("itl_p99_ms", "-itl-p99", "ms"),
        ("server_cpu_s", "-cpu-s", "s"),
        ("turn1_ttft_ms", "-turn1-ttft", "ms"), ("turnN_ttft_ms", "-turnN-ttft", "ms"),
        ("turnN_over_turn1", "-turnN-over-turn1", "x"))
COLS = ("date commit gpu binary model quant scenario ctx n median min max unit "
        "peer peer_median ratio log command").split()
HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "serve-bench.py")


def listening(port):
    """True when something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as so:
        so.settimeout(2)
        return so.connect_ex(("127.0.0.1", port)) == 0


def up(port, proc, log, limit=600):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if proc.poll() is not None:
            raise SystemExit("serve-abba: server exited %d (see %s)" % (proc.returncode, log))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.3)
    raise SystemExit("serve-abba: server on port %d not up in %d s" % (port, limit))


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_s(sid):
    """The CPU seconds (user + system) the processes of session sid (the
    server's command, started in a session of its own) have used, or None."""
    ticks, seen = 0, 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                v = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if len(v) > 12 and int(v[3]) == sid:
            ticks, seen = ticks + int(v[11]) + int(v[12]), seen + 1
    return ticks / os.sysconf("SC_CLK_TCK") if seen else None


def stop(p, port, limit=60):
    """SIGTERM to the server's session, then wait until none of its processes
    is left and its port is closed (SIGKILL after limit s): the next run must
    meet its own server, never a draining or stray one."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    p.wait()
    t0 = time.monotonic()
    while cpu_s(p.pid) is not None or listening(port):
        if time.monotonic() - t0 > limit:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if time.monotonic() - t0 > limit + 10:
                raise SystemExit("serve-abba: the server on port %d outlived SIGKILL" % port)
        time.sleep(0.2)


def one_run(cmd, port, client, bench, logf):
    if listening(port):
        raise SystemExit("serve-abba: port %d: something listens there before the server "
                         "starts (a server left from an earlier run?)" % port)
    logf.write("== %s\n# load %s (1, 5, 15 min) at the start\n" % (cmd, loadavg()))
    logf.flush()
    p = subprocess.Popen(cmd, shell=True, stdout=logf, stderr=logf, start_new_session=True)
    try:
        up(port, p, logf.name)
        c0 = cpu_s(p.pid)
        out = subprocess.run([sys.executable, client, "http://127.0.0.1:%d" % port] +
                             (["--json"] if client == BENCH else []) + bench.split(),
                             stdout=subprocess.PIPE, check=True).stdout.decode()
        c1 = cpu_s(p.pid)
    finally:
        stop(p, port)
    logf.write(out)
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    if len(rows) == 1 and c0 is not None and c1 is not None:
        rows[0]["server_cpu_s"] = round(c1 - c0, 2)
        logf.write("# server cpu %.2f s over the bench (session %d)\n" % (c1 - c0, p.pid))
    logf.write("# load %s (1, 5, 15 min) at the end\n" % loadavg())
    logf.flush()
    return rows


def sh(cmd):
    return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode().strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-a", required=True)
    ap.add_argument("-b", required=True)
    ap.add_argument("--port-a", type=int, required=True)
    ap.add_argument("--port-b", type=int, required=True)
    ap.add_argument("--blocks", type=int, default=1)
    ap.add_argument("--bench", default="")
    ap.add_argument("--bench-b", default=None, help="B's client arguments (default: --bench)")
    ap.add_argument("--client", default=BENCH,
                    help="the load: a script taking URL then the arguments (default serve-bench.py)")
    ap.add_argument("--scenario", default="serve", help="the rows' scenario prefix")
    ap.add_argument("--tsv")
    ap.add_argument("--log", default="/dev/null")
    ap.add_argument("--binary", default="serve")
    ap.add_argument("--model", default="?")
    ap.add_argument("--quant", default="?")
    ap.add_argument("--peer", default="llama-server")
    ap.add_argument("--ctx", default="-", help="the context each session has, for the rows")
    a = ap.parse_args()
    # a SIGTERM (timeout(1), a device call's limit) unwinds like an error, so
    # that the running server is stopped, not left behind on its port
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, f: sys.exit(128 + n))
    runs = {"a": [], "b": []}
    for d in (a.tsv, a.log):
        if d and os.path.dirname(d):
            os.makedirs(os.path.dirname(d), exist_ok=True)
    with open(a.log, "a") as logf:
        for _ in range(a.blocks):
            for arm in "abba":
                cmd, port = (a.a, a.port_a) if arm == "a" else (a.b, a.port_b)
                bench = a.bench if arm == "a" or a.bench_b is None else a.bench_b
                runs[arm].append(one_run(cmd, port, a.client, bench, logf))
    gpu = sh("nvidia-smi --query-gpu=name --format=csv,noheader | head -1").replace(" ", "_") or \
        "cpu:" + sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip().replace(" ", "_")
    rows = []
    for k, row in enumerate(runs["a"][0]):
        c = row["c"]
        for key, suf, unit in FIGS:
            va = [r[k][key] for r in runs["a"] if r[k].get(key) is not None]
            vb = [r[k][key] for r in runs["b"] if r[k].get(key) is not None]
            if not va or not vb:
                continue
            ma, mb = statistics.median(va), statistics.median(vb)
            print("c=%d %-13s A %.2f (%.2f..%.2f)  B %.2f  A/B %.3f" %
                  (c, key, ma, min(va), max(va), mb, ma / mb if mb else float("nan")))
            rows.append([datetime.date.today().isoformat(), os.environ.get("MEMRA_COMMIT") or sh("git rev-parse --short HEAD"), gpu,
                         a.binary, a.model, a.quant, "%s-c%d%s" % (a.scenario, c, suf), a.ctx,
                         str(len(va)),
                         "%.2f" % ma, "%.2f" % min(va), "%.2f" % max(va), unit, a.peer,
                         "%.2f" % mb, "%.3f" % (ma / mb if mb else float("nan")),
                         os.path.basename(a.log), os.path.basename(a.client) + " " + a.bench])
    if a.tsv:
        new = not os.path.exists(a.tsv)
        with open(a.tsv, "a") as f:
            if new:
                f.write("\t".join(COLS) + "\n")
            for r in rows:
                f.write("\t".join(r) + "\n")


main()
