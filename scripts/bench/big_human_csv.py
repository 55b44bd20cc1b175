"""Write a large human CSV for the fetch/score memory check (docs/reliability.md, "Large inputs").

Usage: python3 scripts/bench/big_human_csv.py SRC DST BYTES [SKIP_IDS]

Copies SRC's data rows, with fresh sequential ids, until DST holds at least BYTES bytes. Rows
whose original id is in SKIP_IDS (comma-separated, e.g. the ids data/parity_allowlist.csv names
for this instrument) are left out: the allow-list names rows by id, so a copy of such a row
under a fresh id would be an unexplained row and stop the score stage by design.
"""
import sys


def main():
    src, dst, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
    skip = set(sys.argv[4].split(",")) if len(sys.argv) > 4 else set()
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = lines[0]
    rows = [line.split(",", 1) for line in lines[1:]]
    rows = [rest for (rid, rest) in rows if rid not in skip]
    size = 0
    n = 0
    with open(dst, "w", encoding="utf-8", newline="\n") as out:
        out.write(header + "\n")
        while size < target:
            for rest in rows:
                n += 1
                line = f"{n},{rest}\n"
                out.write(line)
                size += len(line)
    print(f"{n} rows, {size} bytes after the header")


if __name__ == "__main__":
    main()
