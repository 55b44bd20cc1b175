"""Counts quoted in data/recorded/README.md: python3 data/recorded/summarize.py FILE.jsonl

Reads administer records only; how many replies are readable answers is decided by the answers
crate's strict parser (`protospread run`), not here.
"""
import collections
import json
import sys

recs = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
print("records", len(recs), "errors", sum(r["error"] is not None for r in recs))
print("per condition", dict(collections.Counter(r["condition"] for r in recs)))
print("finish_reason", dict(collections.Counter((r["mode"], r["x_finish_reason"]) for r in recs)))
by = {(r["condition"], r["sample"], r["item"]): r["reply"] for r in recs}
print("S0 == S0r replies:", sum(by[("S0", 1, i)] == by[("S0r", 1, i)] for i in range(1, 51)), "of 50")
print("B0 == B0r replies:", by[("B0", 1, None)] == by[("B0r", 1, None)])
print("response models", sorted(set(r["x_response_model"] for r in recs)))
print("total tokens", sum(r["x_usage"]["total_tokens"] for r in recs))
