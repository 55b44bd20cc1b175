"""Compare two recordings of the same administration, record by request key.

Usage: python3 data/recorded/compare.py A.jsonl B.jsonl

Prints how many records each file has, whether the request keys come in the same order, and
for every field that differs between the two records of a request key, in how many requests
it differs. x_elapsed_ms and x_received_unix_ms (wall-clock times) differ between any two runs.
"""
import collections
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print(f"records: {len(a)} and {len(b)}")
    ka = [r["x_request_key"] for r in a]
    kb = [r["x_request_key"] for r in b]
    print(f"same request keys in the same order: {ka == kb}")
    by_key = {r["x_request_key"]: r for r in b}
    differ = collections.Counter()
    missing = 0
    for r in a:
        other = by_key.get(r["x_request_key"])
        if other is None:
            missing += 1
            continue
        for field in sorted(set(r) | set(other)):
            if r.get(field) != other.get(field):
                differ[field] += 1
    print(f"request keys of the first file missing from the second: {missing}")
    if not differ:
        print("no field differs")
    for field, n in sorted(differ.items()):
        print(f"{field}: differs in {n} of {len(a)} records")


if __name__ == "__main__":
    main()
