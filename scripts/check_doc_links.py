#!/usr/bin/env python3
"""Check that every relative link and image in the documentation resolves.

  check_doc_links.py [--root DIR] [FILE.md ...]

Default files: README.md, docs/*.md and the README.md of every top-level folder. For each
Markdown link or image `[text](target)` outside code, a target that is not a URL must name an
existing file or folder (relative to the linking file), and an anchor (`file.md#section` or
`#section`) must be a heading of that Markdown file, slugged as GitHub does (lower case,
punctuation dropped, spaces to hyphens, repeats numbered -1, -2, ...). Prints every broken link
and exits 1 when there is one; 0 otherwise. Python 3 standard library only.
"""

import argparse
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, with inline code spans blanked."""
    in_fence = False
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        in_fence = False
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if FENCE.match(line):
                    in_fence = not in_fence
                    continue
                match = None if in_fence else HEADING.match(line)
                if match:
                    base = slug(match.group(2))
                    count = seen.get(base, 0)
                    seen[base] = count + 1
                    found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def check(path, root):
    problems = []
    for number, line in prose_lines(path):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            where = f"{os.path.relpath(path, root)}:{number}: ({target})"
            if file_part:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(resolved):
                    problems.append(f"{where}: {os.path.relpath(resolved, root)} does not exist")
                    continue
            else:
                resolved = path
            if anchor:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append(f"{where}: an anchor on a file that is not Markdown")
                elif anchor not in anchors(resolved):
                    problems.append(f"{where}: no heading #{anchor} in {os.path.relpath(resolved, root)}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="repository root (default: this script's parent folder)")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    root = os.path.abspath(args.root or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not os.path.isfile(os.path.join(root, "README.md")):
        print(f"check_doc_links.py: error: --root {root}: no README.md there (the repository "
              "root?)", file=sys.stderr)
        return 2
    files = [os.path.abspath(f) for f in args.files]
    for path in files:
        if not os.path.isfile(path):
            print(f"check_doc_links.py: error: {path}: not a file", file=sys.stderr)
            return 2
    if not files:
        files = [os.path.join(root, "README.md")]
        files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
        files += sorted(glob.glob(os.path.join(root, "*", "README.md")))
        files += sorted(glob.glob(os.path.join(root, "*", "*", "README.md")))
        files = [f for f in files if os.path.isfile(f) and f"{os.sep}build{os.sep}" not in f]
    problems, links = [], 0
    for path in files:
        problems += check(path, root)
        links += sum(len(LINK.findall(line)) for _, line in prose_lines(path))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} broken links in {len(files)} files")
        return 1
    print(f"{links} links in {len(files)} files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
