"""Shared by the summaries of bench/point_select.sh and bench/short_conn.sh: their raw.csv,
medians across rounds, number formatting. Those scripts run their summary program with
bench/ on the module path (`summarize` in bench/lib.sh)."""

import csv
import statistics


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(rs, key):
    """Median of column `key` over the rows `rs`, empty cells left out; None if all are empty."""
    vals = [float(r[key]) for r in rs if r.get(key) not in ("", None)]
    return statistics.median(vals) if vals else None


def fmt(v, nd):
    """`v` with thousands separators and `nd` decimals; "–" for None."""
    return "–" if v is None else f"{v:,.{nd}f}"


def rounds(rs):
    """The rounds cell of a table: how many runs, and how many of them failed (exit not 0)."""
    bad = sum(1 for r in rs if r["exit"] != "0")
    return f"{len(rs)} ({bad} failed)" if bad else str(len(rs))
