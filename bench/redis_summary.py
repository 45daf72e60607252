"""Summary of bench/redis.sh: medians across rounds of its raw.csv (round 0, the warm-up, left
out) as a markdown table, and the Redis door's goals of its issue, met or not.

    python3 bench/redis_summary.py bench/out/redis-<time>/raw.csv

Rows are (test, value size, pipeline); per target, requests/s and the server's CPU per
request: redis-server's for the redis targets, manifold's + mariadbd's for the manifold ones
(the two parts in brackets)."""

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
KEYS = ("rps", "server_us_per_req", "mariadb_us_per_req", "avg_ms", "p99_ms", "db_stmts_per_req")


def main(path):
    rows = [r for r in read_rows(path) if r["round"] not in ("0", "perf")]
    if not rows:
        print("no runs")
        return
    targets = [t for t in TARGETS if any(r["target"] == t for r in rows)]
    cells = list(dict.fromkeys((r["test"], int(r["size"]), int(r["pipeline"])) for r in rows))
    cells.sort(key=lambda c: (c[0] != "set", c[1], c[2]))
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
    head = "| test | size | -P |"
    rule = "|---|---:|---:|"
    for t in targets:
        head += f" {LABELS[t]} k/s | µs/req |"
        rule += "---:|---:|"
    print(head)
    print(rule)
    for c in cells:
        line = f"| {c[0].upper()} | {c[1]} | {c[2]} |"
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

    # Latency and MariaDB statements per request, for the manifold targets.
    print("| test | size | -P | target | avg ms | p99 ms | MariaDB statements/req |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for c in cells:
        for t in targets:
            d = m.get((c, t))
            if d:
                print(f"| {c[0].upper()} | {c[1]} | {c[2]} | {t} | {fmt(d['avg_ms'], 2)} | "
                      f"{fmt(d['p99_ms'], 2)} | {fmt(d['db_stmts_per_req'], 3) if t.startswith('manifold') else ''} |")
    print()

    # The goals.
    def rps(test, size, p, t):
        d = m.get(((test, size, p), t))
        return d["rps"] if d else None

    pipes = sorted({c[2] for c in cells})
    deep = pipes[-1]
    lines = []

    def goal(text, value, want, unit="×"):
        if value is None:
            lines.append(f"| {text} | – | {unit}{want} | not measured |")
        else:
            shown = f"{value:,.0f}" if unit == "" else f"{value:.2f}×"
            lines.append(f"| {text} | {shown} | ≥ {want:,}{'' if unit == '' else '×'} | "
                         f"{'**met**' if value >= want else 'not met'} |")

    def ratio(a, b):
        return a / b if a is not None and b else None

    for size in sorted({c[1] for c in cells}):
        g1, sql_g = rps("get", size, 1, "manifold"), rps("get", size, 1, "manifold-sql")
        goal(f"{size} B: ping-pong GET / SQL point select", ratio(g1, sql_g), 1)
        if deep > 1:
            gd = rps("get", size, deep, "manifold")
            goal(f"{size} B: -P {deep} GET / ping-pong GET", ratio(gd, g1), 10)
            goal(f"{size} B: -P {deep} GET, keys/s", gd, 200000, unit="")
            sd, s1 = rps("set", size, deep, "manifold"), rps("set", size, 1, "manifold")
            goal(f"{size} B: -P {deep} SET / SQL autocommit upsert", ratio(sd, rps("set", size, 1, "manifold-sql")), 20)
            goal(f"{size} B: -P {deep} SET / ping-pong SET (door)", ratio(sd, s1), 20)
            goal(f"{size} B: -P {deep} SET / redis-aof -P {deep} SET", ratio(sd, rps("set", size, deep, "redis-aof")), 0.25)
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
