"""Counts quoted in data/recorded/README.md.

    python3 data/recorded/summarize.py FILE.jsonl            # one recording
    python3 data/recorded/summarize.py FILE.jsonl OTHER.jsonl  # and which replies differ

Reads administer records only; how many replies are readable answers is decided by the answers
crate's strict parser (`protospread run`), not here. "bare number" below means the whole reply,
stripped of surrounding whitespace, is one decimal integer: a description of the replies'
shape, not the study's parsing rule.
"""
import collections
import json
import re
import sys


def load(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


recs = load(sys.argv[1])
print("records", len(recs), "errors", sum(r["error"] is not None for r in recs))
print("per condition", dict(collections.Counter(r["condition"] for r in recs)))
print("finish_reason", dict(collections.Counter((r["mode"], r["x_finish_reason"]) for r in recs)))
bare = collections.Counter(
    r["condition"] for r in recs if r["mode"] == "single" and re.fullmatch(r"\d+", r["reply"].strip())
)
print("single-item replies that are a bare number, per condition", dict(bare))
# Which number, as shown (option 1..5 of the options as listed in the prompt, so under SR's
# reversed list "4" is the human option 2): a constant answer shows up here at a glance.
shown = collections.defaultdict(collections.Counter)
for r in recs:
    if r["mode"] == "single":
        reply = r["reply"].strip()
        shown[r["condition"]][reply if re.fullmatch(r"\d+", reply) else "other"] += 1
print("single-item replies by shown number, per condition", {c: dict(sorted(n.items())) for c, n in shown.items()})
by = {(r["condition"], r["sample"], r["item"]): r["reply"] for r in recs}
pairs = [i for i in range(1, 51) if ("S0", 1, i) in by and ("S0r", 1, i) in by]
print("S0 == S0r replies:", sum(by[("S0", 1, i)] == by[("S0r", 1, i)] for i in pairs), "of", len(pairs))
if ("B0", 1, None) in by and ("B0r", 1, None) in by:
    print("B0 == B0r replies:", by[("B0", 1, None)] == by[("B0r", 1, None)])
print("response models", sorted(set(r["x_response_model"] for r in recs)))
print("total tokens", sum(r["x_usage"]["total_tokens"] for r in recs))
if len(sys.argv) > 2:
    other = {r["x_request_key"]: r for r in load(sys.argv[2])}
    same, differ, body = collections.Counter(), collections.Counter(), 0
    for r in recs:
        o = other.get(r["x_request_key"])
        if o is None:
            continue
        body += o["x_request_sha256"] != r["x_request_sha256"]
        (same if o["reply"] == r["reply"] else differ)[r["condition"]] += 1
    print("compared with", sys.argv[2], "- requests with a different body:", body)
    print("same reply per condition", dict(same))
    print("different reply per condition", dict(differ))
