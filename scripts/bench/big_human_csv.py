"""Write a large human CSV for the fetch/score memory check (docs/reliability.md, "Large inputs").

Usage: python3 scripts/bench/big_human_csv.py [--descending] SRC DST BYTES [SKIP_IDS]

Copies SRC's data rows, with fresh sequential ids, until DST holds at least BYTES bytes
(with --descending the same rows get the same ids counted down, so the file is out of id
order and the fetch stage must sort it). Rows
whose original id is in SKIP_IDS (comma-separated, e.g. the ids data/parity_allowlist.csv names
for this instrument) are left out: the allow-list names rows by id, so a copy of such a row
under a fresh id would be an unexplained row and stop the score stage by design.
"""
import sys


def main():
    args = sys.argv[1:]
    descending = args[:1] == ["--descending"]
    if descending:
        args = args[1:]
    src, dst, target = args[0], args[1], int(args[2])
    skip = set(args[3].split(",")) if len(args) > 3 else set()
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = lines[0]
    rows = [line.split(",", 1) for line in lines[1:]]
    rows = [rest for (rid, rest) in rows if rid not in skip]
    # First the ascending ids, to know how many rows reach BYTES.
    size = 0
    n = 0
    while size < target:
        for rest in rows:
            n += 1
            size += len(f"{n},{rest}\n")
    with open(dst, "w", encoding="utf-8", newline="\n") as out:
        out.write(header + "\n")
        for i in range(n):
            rid = n - i if descending else i + 1
            out.write(f"{rid},{rows[i % len(rows)]}\n")
    print(f"{n} rows, {size} bytes after the header")


if __name__ == "__main__":
    main()
