#!/usr/bin/env python3
"""Acceptance check of `protospread sweep lm-eval` against lm-evaluation-harness itself.

Usage: lm_eval_check.py DIR [DIR ...]   (each DIR written by `protospread sweep lm-eval`)

For every DIR it
1. loads lm-eval's own TaskManager(include_path=DIR) and requires every name in DIR/tasks.txt
   (and, for MMLU, every subject task of every group) to be registered;
2. for every delimiter x variant (MMLU: one subject, abstract_algebra), builds the task from
   the generated file (includes resolved by lm-eval) with its dataset replaced by a small
   local JSON data set written here (same fields as the real one; no network), renders the
   few-shot context of one test document with a chat template and
   fewshot_as_multiturn=False, and checks that
   - the user message holds num_fewshot examples, each followed by exactly the chosen
     delimiter (between examples, and between the last example and the question);
   - the named variant's system message is the naming line with the delimiter quoted as in
     the task file, and (MMLU) starts with lm-eval's own subject description;
   - the plain variant keeps the base task's description (MMLU) or has none (ARC, CSQA).
Prints one line per failure and exits 1 if there is any; prints a summary otherwise.
"""
import json
import logging
import os
import sys
import tempfile

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lm_eval.api.task import ConfigurableTask  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

N_TRAIN = 8
LETTERS = "ABCDE"

# The delimiter each slug stands for, written out here independently of protospread, so a
# task file whose fewshot_delimiter disagrees with its name is caught.
SLUGS = {"space": " ", "exclam": "!", "dquote": '"', "hash": "#", "dollar": "$", "percent": "%",
         "amp": "&", "squote": "'", "lparen": "(", "rparen": ")", "star": "*", "plus": "+",
         "comma": ",", "minus": "-", "dot": ".", "slash": "/", "colon": ":", "semicolon": ";",
         "lt": "<", "eq": "=", "gt": ">", "question": "?", "at": "@", "lbracket": "[",
         "backslash": "\\", "rbracket": "]", "caret": "^", "underscore": "_", "backtick": "`",
         "lbrace": "{", "pipe": "|", "rbrace": "}", "tilde": "~", "nl": "\n", "tab": "\t"}


def expected_delimiter(task_name):
    slug = task_name.rsplit("_", 2)[1]
    if slug in SLUGS:
        return SLUGS[slug]
    return bytes.fromhex(slug[1:]).decode("utf-8")


def marker(split, i):
    # A unique, delimiter-free token at the start of every question.
    return f"QX{split}{i}QX"


def make_docs(bench, split, n):
    docs = []
    for i in range(n):
        m = marker(split, i)
        if bench == "mmlu":
            docs.append({"question": f"{m} what is {i} plus one", "subject": "abstract_algebra",
                         "choices": [f"w{i}", f"x{i}", f"y{i}", f"z{i}"], "answer": i % 4})
        elif bench == "arc_challenge":
            docs.append({"id": f"d{split}{i}", "question": f"{m} which one is {i}",
                         "choices": {"text": [f"aa{i}", f"bb{i}", f"cc{i}", f"dd{i}"],
                                     "label": ["A", "B", "C", "D"]},
                         "answerKey": "ABCD"[i % 4]})
        else:
            docs.append({"id": f"d{split}{i}", "question": f"{m} pick {i}", "question_concept": "c",
                         "choices": {"label": list(LETTERS), "text": [f"t{k}{i}" for k in range(5)]},
                         "answerKey": LETTERS[i % 5]})
    return docs


def answer_text(bench, doc):
    if bench == "mmlu":
        return "ABCD"[doc["answer"]]
    if bench == "arc_challenge":
        return doc["choices"]["text"][doc["choices"]["label"].index(doc["answerKey"])]
    return doc["answerKey"]


def bench_of(task_name):
    for b in ("mmlu", "arc_challenge", "commonsense_qa"):
        if task_name.startswith(b + "_"):
            return b
    raise ValueError(task_name)


def write_data(tmp, bench):
    files = {}
    splits = {"mmlu": ["dev", "test"], "arc_challenge": ["train", "validation", "test"],
              "commonsense_qa": ["train", "validation"]}[bench]
    for split in splits:
        p = os.path.join(tmp, f"{bench}_{split}.jsonl")
        n = N_TRAIN if split in ("dev", "train") else 2
        with open(p, "w", encoding="utf-8") as f:
            for d in make_docs(bench, split, n):
                f.write(json.dumps(d) + "\n")
        files[split] = p
    return files


def render(messages, add_generation_prompt=True):
    # A stand-in chat template that keeps roles and contents recoverable.
    return json.dumps(messages)


def quoted(d):
    q = "'" if '"' in d else '"'
    body = d.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return q + body + q


def check_task(tm, name, files, tmp, failures, base_desc, multiturn=False):
    bench = bench_of(name)
    entry = tm.task_index[name]
    cfg = load_yaml(entry.yaml_path, resolve_func=True)
    delim = expected_delimiter(name)
    if cfg["fewshot_delimiter"] != delim:
        failures.append(f"{name}: fewshot_delimiter {cfg['fewshot_delimiter']!r}, name says {delim!r}")
    variant = name.rsplit("_", 1)[1]
    k = cfg["num_fewshot"]
    cfg.pop("tag", None)
    cfg["dataset_path"] = "json"
    cfg.pop("dataset_name", None)
    cfg["dataset_kwargs"] = {"data_files": files}
    task = ConfigurableTask(config=cfg)
    eval_split = "test" if "test" in files else "validation"
    doc = make_docs(bench, eval_split, 2)[0]
    out = json.loads(task.fewshot_context(doc, k, apply_chat_template=True,
                                          fewshot_as_multiturn=multiturn, chat_template=render))
    roles = [m["role"] for m in out]
    users = [m["content"] for m in out if m["role"] == "user"]
    if len(users) != 1:
        failures.append(f"{name}: expected one user message, got roles {roles}")
        return
    user = users[0]
    shot_split = "dev" if "dev" in files else "train"
    shots = make_docs(bench, shot_split, N_TRAIN)
    found = sorted((user.index(marker(shot_split, i)), i) for i in range(N_TRAIN)
                   if marker(shot_split, i) in user)
    if len(found) != k:
        failures.append(f"{name}: {len(found)} examples in the user message, expected {k}")
        return
    qpos = user.index(marker(eval_split, 0))
    prefix = user[:found[0][0]]  # text before the first question marker, e.g. "Question: "
    bounds = [p for p, _ in found] + [qpos]
    for j, (pos, i) in enumerate(found):
        segment = user[pos:bounds[j + 1]]
        want_end = answer_text(bench, shots[i]) + delim + prefix
        if not segment.endswith(want_end):
            failures.append(f"{name}: example {j + 1} is not followed by the delimiter {delim!r}: "
                            f"...{segment[-40:]!r}")
    system = [m["content"] for m in out if m["role"] == "system"]
    naming = f"The question-answer examples are separated by {quoted(delim)}."
    if variant == "named":
        if len(system) != 1 or naming not in system[0]:
            failures.append(f"{name}: naming line {naming!r} not in the system message {system!r}")
        elif bench == "mmlu" and not system[0].startswith(base_desc.rstrip("\n").rstrip(".")):
            failures.append(f"{name}: named description {system[0]!r} does not start with lm-eval's {base_desc!r}")
    else:
        want = [base_desc] if base_desc else []
        if system != want:
            failures.append(f"{name}: plain variant system messages {system!r}, expected {want!r}")
        if any("separated by" in s for s in system):
            failures.append(f"{name}: plain variant names the delimiter")


def main(dirs):
    logging.disable(logging.WARNING)  # lm-eval warns once per task about its fewshot split
    failures = []
    tm = TaskManager(include_path=[os.path.abspath(d) for d in dirs])
    registered = set(tm.all_tasks)
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            with open(os.path.join(d, "tasks.txt"), encoding="utf-8") as f:
                runs = [line.strip() for line in f if line.strip()]
            for r in runs:
                if r not in registered:
                    failures.append(f"{d}: {r} is not registered by lm-eval's TaskManager")
            bench = bench_of(runs[0])
            files = write_data(tmp, bench)
            base_desc = ""
            if bench == "mmlu":
                base_desc = load_yaml(tm.task_index["mmlu_abstract_algebra"].yaml_path)["description"]
            for r in runs:
                if r not in registered:
                    continue
                if bench == "mmlu":
                    members = load_yaml(tm.task_index[r].yaml_path)["task"]
                    missing = [m for m in members if m not in registered]
                    if len(members) != 57 or missing:
                        failures.append(f"{r}: {len(members)} subject tasks, unregistered: {missing[:3]}")
                    leaf = [m for m in members if m.startswith("mmlu_abstract_algebra_")][0]
                    check_task(tm, leaf, files, tmp, failures, base_desc)
                else:
                    check_task(tm, r, files, tmp, failures, base_desc)
                checked += 1
        # Self-test: the same check on a multi-turn rendering (lm-eval's default with a chat
        # template) must fail, or the check above proves nothing.
        arc = [d for d in dirs if os.path.exists(os.path.join(d, "arc_challenge_delim_hash_plain.yaml"))]
        if arc:
            probe = []
            check_task(tm, "arc_challenge_delim_hash_plain", write_data(tmp, "arc_challenge"), tmp,
                       probe, "", multiturn=True)
            if not probe:
                failures.append("self-test: a multi-turn rendering passed the delimiter check")
            else:
                print(f"self-test: multi-turn rendering fails the check as it should ({probe[0][:90]}...)")
    for f in failures:
        print("FAIL", f)
    print(f"lm-eval check: {checked} task variants rendered, {len(failures)} failure(s)")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
