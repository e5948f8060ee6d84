#!/usr/bin/env python3
"""Plain-Python SWE-RL reward scorer on the standard library's difflib.

Written from ../shared/docs/SWE-RL.md section 4 as the baseline that
`swerl reward` is measured against (bench/reward/run.sh) and checked with.
It reads JSONL records and writes one JSONL result per record, in order:

  search/replace record: code_context, oracle_new_content, output
  unidiff record:        oracle_patches, pred_patches
  result:                id, reward, and error or similarities

The unidiff mode needs a unified-diff parser; the reference uses the
`unidiff` package, which is not in the standard library, so a small parser
with the same rules (the ones the shared conformance diffs exercise: git
headers, ---/+++ headers, hunks sized by their header counts, "\\ No newline"
markers, empty lines after hunks, renames, binary entries) lives here.

Usage: reference.py [--check] IN.jsonl [OUT.jsonl]
  --check  compare each reward with the record's expected_reward (1e-9) and
           exit 1 on any mismatch.
"""
import difflib
import json
import re
import resource
import sys

SR_RE = re.compile(
    r"```.*?\n### (.*)\n<<<<<<< SEARCH\n([\s\S]*?)\n=======\n([\s\S]*?)\n>>>>>>> REPLACE\n```"
)
TAGS = ("<think>", "</think>", "<solution>", "</solution>")


class FormatError(Exception):
    pass


def thought_and_answer(output):
    for tag in TAGS:
        if output.count(tag) != 1:
            raise FormatError(f"count of {tag} is not 1")
    thought = output.split("<think>")[1].split("</think>")[0].strip()
    answer = output.split("<solution>")[1].split("</solution>")[0].strip()
    if not thought:
        raise FormatError("Thought is empty")
    return thought, answer


def edits_by_path(answer):
    out = {}
    for path, search, replace in SR_RE.findall(answer):
        out.setdefault(path, []).append((search, replace))
    return out


def apply_edits(ctx, edits):
    new = {}
    for path, pairs in edits.items():
        text = "\n" + ctx.get(path, "")
        for search, replace in pairs:
            if search == replace:
                raise FormatError("Search and replace blocks are identical")
            search, replace = "\n" + search, "\n" + replace
            if search not in text:
                raise FormatError(f"Search block not found in the code: {search}")
            text = text.replace(search, replace)
        new[path] = text[1:]
    return new


def diff_body(old, new):
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), fromfile="old", tofile="new", lineterm="", n=3
        )
    )
    return "\n".join(lines[2:])


def normalized(ctx, new_content):
    out = {}
    for path, text in new_content.items():
        d = diff_body(ctx.get(path, ""), text)
        if d:
            out[path] = d
    return out


def similarities(pred, oracle):
    sims = {}
    for path in set(pred) | set(oracle):
        p, o = pred.get(path, ""), oracle.get(path, "")
        if not p or not o:
            sims[path] = 0.0
        else:
            sims[path] = difflib.SequenceMatcher(None, p, o, autojunk=False).ratio()
    return sims


def mean(sims):
    if not sims:
        return 1.0
    return sum(sims[p] for p in sorted(sims)) / len(sims)


def search_replace_reward(ctx, oracle_new, output):
    try:
        _, answer = thought_and_answer(output)
        edits = edits_by_path(answer)
        if not edits:
            raise FormatError("No valid search blocks found")
        pred_new = apply_edits(ctx, edits)
    except FormatError as e:
        return -1.0, {"error": str(e)}
    sims = similarities(normalized(ctx, pred_new), normalized(ctx, oracle_new))
    return mean(sims), {"similarities": sims}


# --- unified diffs --------------------------------------------------------

GIT_HEADER = re.compile(r"^diff --git (a/[^\t\n]+) (b/[^\t\n]+)")
GIT_HEADER_NO_PREFIX = re.compile(r"^diff --git ([^\t\n]+) ([^\t\n]+)")
NEW_FILE = re.compile(r"^new file mode \d+$")
DELETED_FILE = re.compile(r"^deleted file mode \d+$")
SOURCE = re.compile(r"^--- ([^\t\n]+)(?:\t([^\n]+))?")
TARGET = re.compile(r"^\+\+\+ ([^\t\n]+)(?:\t([^\n]+))?")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@[ ]?(.*)")
BINARY = re.compile(
    r"^Binary files? ([^\t]+?)(?:\t[\s0-9:\+-]+)?(?: and ([^\t]+?)(?:\t[\s0-9:\+-]+)?)? (differ|has changed)"
)


class ParseError(Exception):
    pass


class PFile:
    def __init__(self, source, target, binary=False):
        self.source, self.target, self.binary, self.hunks = source, target, binary, []

    def is_rename(self):
        return (
            self.source != "/dev/null"
            and self.target != "/dev/null"
            and self.source[2:] != self.target[2:]
        )

    def path(self):
        p = self.source
        if p == "/dev/null" or (self.is_rename() and self.target != "/dev/null"):
            p = self.target
        quoted = p.startswith('"') and p.endswith('"')
        if quoted:
            p = p[1:-1]
        if p.startswith("a/") or p.startswith("b/"):
            p = p[2:]
        return f'"{p}"' if quoted else p


def parse_hunk(header, lines, i):
    m = HUNK.match(header)
    s0, sl, t0, tl, section = m.groups()
    sl = 1 if sl is None else int(sl)
    tl = 1 if tl is None else int(tl)
    text = "@@ -%d,%d +%d,%d @@%s\n" % (int(s0), sl, int(t0), tl, " " + section if section else "")
    body = []
    src = tgt = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        kind = line[0]
        if kind in "- +\\":
            value = line[1:]
        elif kind in "\r\n":
            kind = " "
            value = line[:2] if len(line) > 1 and line[1] in "\r\n" else line[:1]
        else:
            raise ParseError("hunk line expected")
        if kind == "+":
            tgt += 1
        elif kind == "-":
            src += 1
        elif kind == " ":
            src += 1
            tgt += 1
        if src > sl or tgt > tl:
            raise ParseError("hunk is longer than expected")
        body.append(kind + value)
        if src == sl and tgt == tl:
            break
    if src < sl or tgt < tl:
        raise ParseError("hunk is shorter than expected")
    return [text, body], i


def parse_patch(text):
    lines = _split_nl(text)
    files, cur, info = [], None, False
    source = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        m = GIT_HEADER.match(line) or GIT_HEADER_NO_PREFIX.match(line)
        if m:
            info, source = True, m.group(1)
            cur = PFile(m.group(1), m.group(2))
            files.append(cur)
            continue
        if NEW_FILE.match(line) or DELETED_FILE.match(line):
            if cur is None or not info:
                raise ParseError("unexpected file mode line")
            if line.startswith("new"):
                cur.source = "/dev/null"
            else:
                cur.target = "/dev/null"
            continue
        m = SOURCE.match(line)
        if m:
            source = m.group(1)
            if cur is not None and cur.source != source:
                cur = None
            continue
        m = TARGET.match(line)
        if m:
            if cur is not None and cur.target != m.group(1):
                raise ParseError("target without source")
            if cur is None:
                if source is None:
                    raise ParseError("target without source")
                cur = PFile(source, m.group(1))
                files.append(cur)
                info = False
            continue
        if HUNK.match(line):
            info = False
            if cur is None:
                raise ParseError("unexpected hunk")
            hunk, i = parse_hunk(line, lines, i)
            cur.hunks.append(hunk)
            continue
        if line.startswith("\\ No newline at end of file"):
            if cur is None or not cur.hunks:
                raise ParseError("unexpected marker")
            cur.hunks[-1][1].append("\\ No newline at end of file\n")
            continue
        if line == "\n" and cur is not None and cur.hunks:
            cur.hunks[-1][1].append("\n")
            continue
        if not info:
            cur, info = None, True
        m = BINARY.match(line)
        if m:
            source = m.group(1)
            if cur is not None:
                cur.binary = True
            else:
                files.append(PFile(m.group(1), m.group(2), binary=True))
            cur, info = None, False
            continue
        if line == "GIT binary patch\n":
            if cur is None:
                raise ParseError("unexpected binary patch")
            cur.binary = True
            cur, info = None, False
    return files


def _split_nl(text):
    out = []
    start = 0
    while start < len(text):
        j = text.find("\n", start)
        if j < 0:
            out.append(text[start:])
            break
        out.append(text[start : j + 1])
        start = j + 1
    return out


def file_level(text):
    try:
        files = parse_patch(text)
    except ParseError:
        return {}
    out = {}
    for f in files:
        if f.binary:
            continue
        if f.is_rename():
            src = f.source[2:] if f.source.startswith("a/") else f.source
            tgt = f.target[2:] if f.target.startswith("b/") else f.target
            header, path = f"rename from {src} to {tgt}", src
        else:
            header, path = "", f.path()
        body = "\n".join((h[0] + "".join(h[1])).strip() for h in f.hunks)
        out[path] = (header + "\n" + body).strip()
    return out


def unidiff_reward(oracle_patches, pred_patches):
    oracle, pred = {}, {}
    for p in oracle_patches:
        oracle.update(file_level(p))
    for p in pred_patches:
        pred.update(file_level(p))
    sims = similarities(pred, oracle)
    return mean(sims), {"similarities": sims}


def score(rec):
    if "oracle_patches" in rec or "pred_patches" in rec:
        return unidiff_reward(rec.get("oracle_patches") or [], rec.get("pred_patches") or [])
    return search_replace_reward(
        rec.get("code_context") or {}, rec.get("oracle_new_content") or {}, rec.get("output") or ""
    )


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.stdin if args[0] == "-" else open(args[0], encoding="utf-8")
    dst = open(args[1], "w", encoding="utf-8") if len(args) > 1 and args[1] != "-" else sys.stdout
    bad = n = 0
    for n, line in enumerate(src, 1):
        rec = json.loads(line)
        reward, meta = score(rec)
        out = {"id": rec.get("id"), "reward": reward}
        out.update(meta)
        dst.write(json.dumps(out, sort_keys=True) + "\n")
        if check and abs(reward - rec["expected_reward"]) > 1e-9:
            bad += 1
            print(f"line {n} ({rec.get('id')}): {reward!r} != {rec['expected_reward']!r}", file=sys.stderr)
    if dst is not sys.stdout:
        dst.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"reference.py: {n} records, {bad} mismatches, peak RSS {rss} KiB", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
