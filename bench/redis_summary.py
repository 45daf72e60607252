"""Summary of bench/redis.sh: medians across rounds of its raw.csv (round 0, the warm-up, left
out) as a markdown table, and the Redis door's goals of its issue, met or not.

    python3 bench/redis_summary.py bench/out/redis-<time>/raw.csv

A table per test, rows (value size, pipeline); per target, requests/s and the server's CPU
per request: redis-server's for the redis targets, manifold's + mariadbd's for the manifold
ones (the two parts in brackets). A request is what the load generator counts as one: a
command for redis-benchmark's tests, one EVALSHA (a script running a GET and an INCR), and a
pair of commands for redisload's getincr-pipe (GET + INCR in one pipeline) and xreadgroup
(XREADGROUP, then XACK of its entry). Then the issue's goals, among them "a script costs no
more than its commands issued as one pipeline": EVALSHA ÷ GET+INCR pipelined, per target."""

import sys

from summary_lib import fmt, med, read_rows

TARGETS = ["redis", "redis-aof", "manifold", "manifold-sql", "manifold-fixed"]
LABELS = {
    "redis": "redis",
    "redis-aof": "redis-aof (fsync always)",
    "manifold": "manifold door",
    "manifold-sql": "manifold SQL",
    "manifold-fixed": "door, fixed pool",
}
KEYS = ("rps", "server_us_per_req", "mariadb_us_per_req", "client_us_per_req", "avg_ms", "p50_ms", "p99_ms",
        "db_stmts_per_req")
# In the order bench/redis.sh runs them; what one request of each is.
TESTS = ["set", "get", "incr", "evalsha", "getincr-pipe", "xadd", "xreadgroup"]
WHAT = {
    "set": "SET",
    "get": "GET",
    "incr": "INCR",
    "evalsha": "EVALSHA of a script doing a GET and an INCR",
    "getincr-pipe": "GET and INCR sent as one pipeline (a pair per request)",
    "xadd": "XADD of one field",
    "xreadgroup": "XREADGROUP COUNT 1 of a consumer group, then XACK of its entry (a pair per request)",
}
# Commands a client sends per request.
COMMANDS = {"getincr-pipe": 2, "xreadgroup": 2}


def main(path):
    rows = [r for r in read_rows(path) if r["round"] not in ("0", "perf")]
    if not rows:
        print("no runs")
        return
    targets = [t for t in TARGETS if any(r["target"] == t for r in rows)]
    cells = list(dict.fromkeys((r["test"], int(r["size"]), int(r["pipeline"])) for r in rows))
    cells.sort(key=lambda c: (TESTS.index(c[0]) if c[0] in TESTS else len(TESTS), c[0], c[1], c[2]))
    m = {}
    runs = {}
    for c in cells:
        for t in targets:
            rs = [r for r in rows if (r["test"], int(r["size"]), int(r["pipeline"])) == c and r["target"] == t]
            if rs:
                m[c, t] = {k: med(rs, k) for k in KEYS}
                runs[c, t] = rs
    bad = [r for r in rows if r["exit"] != "0" or int(r["errors"] or 0)]

    rounds = max(len(v) for v in runs.values())
    print(f"Medians of {rounds} rounds: thousands of requests/s, and the server's CPU µs per "
          "request (manifold: manifold + mariadbd).\n")

    def cpu_of(d, t):
        """The server's CPU µs per request: redis-server's, or manifold's + mariadbd's."""
        srv, db = d["server_us_per_req"], d["mariadb_us_per_req"]
        if t.startswith("manifold"):
            return srv + db if srv is not None and db is not None else None
        return srv

    for test in dict.fromkeys(c[0] for c in cells):
        print(f"{test.upper()}: {WHAT.get(test, test)}\n")
        head = "| size | -P |"
        rule = "|---:|---:|"
        for t in targets:
            head += f" {LABELS[t]} k/s | µs/req |"
            rule += "---:|---:|"
        print(head)
        print(rule)
        for c in (c for c in cells if c[0] == test):
            line = f"| {c[1]} | {c[2]} |"
            for t in targets:
                d = m.get((c, t))
                if not d or d["rps"] is None:
                    line += " | |"
                    continue
                srv, db = d["server_us_per_req"], d["mariadb_us_per_req"]
                if t.startswith("manifold") and srv is not None and db is not None:
                    cpu = f"{srv + db:.1f} ({srv:.1f}+{db:.1f})"
                else:
                    cpu = fmt(srv, 1)
                line += f" {d['rps'] / 1000:,.1f} | {cpu} |"
            print(line)
        print()

    # Latency, CPU per command sent (the server's; the load generator's per request), and
    # MariaDB statements per request.
    print("| test | size | -P | target | avg ms | p50 ms | p99 ms | server µs/command | client µs/req | "
          "MariaDB statements/req |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for c in cells:
        for t in targets:
            d = m.get((c, t))
            if d:
                cpu = cpu_of(d, t)
                per_cmd = None if cpu is None else cpu / COMMANDS.get(c[0], 1)
                print(f"| {c[0].upper()} | {c[1]} | {c[2]} | {t} | {fmt(d['avg_ms'], 2)} | "
                      f"{fmt(d['p50_ms'], 2)} | {fmt(d['p99_ms'], 2)} | {fmt(per_cmd, 1)} | "
                      f"{fmt(d['client_us_per_req'], 1)} | "
                      f"{fmt(d['db_stmts_per_req'], 3) if t.startswith('manifold') else ''} |")
    print()

    # A script against its commands issued as one pipeline, on every target.
    pairs = [(size, p) for (test, size, p) in cells
             if test == "evalsha" and ("getincr-pipe", size, p) in {c for c in cells}]
    if pairs:
        print("EVALSHA ÷ GET+INCR pipelined (a script against its two commands sent as one "
              "pipeline): CPU per request (goal on the door: ≤ 1) and requests/s.\n")
        print("| size | -P | target | EVALSHA µs/req | GET+INCR µs/req | CPU ratio | EVALSHA k/s | "
              "GET+INCR k/s | throughput ratio |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        for size, p in pairs:
            for t in targets:
                e, g = m.get((("evalsha", size, p), t)), m.get((("getincr-pipe", size, p), t))
                if not e or not g:
                    continue
                ec, gc = cpu_of(e, t), cpu_of(g, t)
                cr = ec / gc if ec is not None and gc else None
                tr = e["rps"] / g["rps"] if e["rps"] is not None and g["rps"] else None
                print(f"| {size} | {p} | {t} | {fmt(ec, 1)} | {fmt(gc, 1)} | "
                      f"{'–' if cr is None else f'{cr:.2f}×'} | "
                      f"{fmt(None if e['rps'] is None else e['rps'] / 1000, 1)} | "
                      f"{fmt(None if g['rps'] is None else g['rps'] / 1000, 1)} | "
                      f"{'–' if tr is None else f'{tr:.2f}×'} |")
        print()

    # The goals.
    def rps(test, size, p, t):
        d = m.get(((test, size, p), t))
        return d["rps"] if d else None

    pipes = sorted({c[2] for c in cells})
    deep = pipes[-1]
    lines = []

    def goal(text, value, want, unit="×", at_most=False):
        sign = "≤" if at_most else "≥"
        if value is None:
            lines.append(f"| {text} | – | {sign} {want:,}{unit} | not measured |")
        else:
            shown = f"{value:,.0f}" if unit == "" else f"{value:.2f}×"
            met = value <= want if at_most else value >= want
            lines.append(f"| {text} | {shown} | {sign} {want:,}{unit} | "
                         f"{'**met**' if met else 'not met'} |")

    def ratio(a, b):
        return a / b if a is not None and b else None

    for size in sorted({c[1] for c in cells}):
        g1, sql_g = rps("get", size, 1, "manifold"), rps("get", size, 1, "manifold-sql")
        # The goals of SET and GET, where those tests ran.
        kv_tests = any(c[0] in ("set", "get") and c[1] == size for c in cells)
        if kv_tests:
            goal(f"{size} B: ping-pong GET / SQL point select", ratio(g1, sql_g), 1)
        if kv_tests and deep > 1:
            gd = rps("get", size, deep, "manifold")
            goal(f"{size} B: -P {deep} GET / ping-pong GET", ratio(gd, g1), 10)
            goal(f"{size} B: -P {deep} GET, keys/s", gd, 200000, unit="")
            sd, s1 = rps("set", size, deep, "manifold"), rps("set", size, 1, "manifold")
            goal(f"{size} B: -P {deep} SET / SQL autocommit upsert", ratio(sd, rps("set", size, 1, "manifold-sql")), 20)
            goal(f"{size} B: -P {deep} SET / ping-pong SET (door)", ratio(sd, s1), 20)
            goal(f"{size} B: -P {deep} SET / redis-aof -P {deep} SET", ratio(sd, rps("set", size, deep, "redis-aof")), 0.25)
        # Issue 27: a script costs no more than its commands issued as one pipeline.
        for p in pipes:
            e, g = m.get((("evalsha", size, p), "manifold")), m.get((("getincr-pipe", size, p), "manifold"))
            if e or g:
                goal(f"{size} B: -P {p} door EVALSHA ÷ GET+INCR pipelined, CPU/req",
                     ratio(e and cpu_of(e, "manifold"), g and cpu_of(g, "manifold")), 1, at_most=True)
                goal(f"{size} B: -P {p} door EVALSHA ÷ GET+INCR pipelined, requests/s",
                     ratio(e and e["rps"], g and g["rps"]), 1)
    print("| goal (issue) | measured | wanted | |")
    print("|---|---:|---:|---|")
    for line in lines:
        print(line)
    if bad:
        print(f"\n{len(bad)} run(s) failed or got errors:")
        for r in bad:
            print(f"- round {r['round']} {r['target']} {r['test']} {r['size']} -P {r['pipeline']}: "
                  f"exit {r['exit']}, errors {r['errors']}")


if __name__ == "__main__":
    main(sys.argv[1])
