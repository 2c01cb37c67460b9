# SPDX-License-Identifier: MIT
"""Sums Nsight Compute's per-instruction counts by opcode and lists the hottest instructions.

usage: sass_counts.py SOURCE.csv [top]

SOURCE.csv: `ncu -i REPORT --page source --csv --print-source sass` of a report taken with the
SourceCounters section (bench/ncu_instructions.sh writes one). Prints the kernel's executed warp
instructions, each opcode's share of them, and the `top` (default 40) instructions executed most
often with their addresses, so that a kernel's instructions can be set against the work it
should do (docs/PERF.md)."""
import collections
import csv
import re
import sys


def column(header, *names):
    for name in names:
        for i, h in enumerate(header):
            if h.strip().lower() == name.lower():
                return i
    for name in names:
        for i, h in enumerate(header):
            if name.lower() in h.lower():
                return i
    return None


def main(argv):
    if not argv:
        sys.exit(__doc__)
    top = int(argv[1]) if len(argv) > 1 else 40
    with open(argv[0], newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if column(r, "Source") is not None), None)
    if start is None:
        sys.exit("no header with a Source column in " + argv[0])
    header = rows[start]
    src = column(header, "Source")
    addr = column(header, "Address")
    count = column(header, "Instructions Executed", "inst_executed")
    if count is None:
        sys.exit("no 'Instructions Executed' column; columns: " + ", ".join(header))
    by_op = collections.Counter()
    lines = []
    for r in rows[start + 1:]:
        if len(r) <= max(src, count):
            continue
        try:
            n = float(r[count].replace(",", ""))
        except ValueError:
            continue
        m = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", r[src])
        if not m or n == 0:
            continue
        by_op[m.group(1)] += n
        lines.append((n, r[addr] if addr is not None else "", r[src].strip()))
    total = sum(by_op.values())
    if total == 0:
        sys.exit("no executed instructions in " + argv[0])
    print(f"executed warp instructions: {total:,.0f}")
    for op, n in by_op.most_common():
        print(f"{n:16,.0f} {100 * n / total:6.2f} %  {op}")
    print(f"\nthe {top} instructions executed most often:")
    for n, a, s in sorted(lines, reverse=True)[:top]:
        print(f"{n:14,.0f}  {a}  {s}")


if __name__ == "__main__":
    main(sys.argv[1:])
