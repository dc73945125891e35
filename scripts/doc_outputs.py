#!/usr/bin/env python3
"""Regenerate, or check, the osdp outputs shown in README.md and docs/*.md.

A shown output is a fenced block between two markers:

    <!-- osdp-output: osdp plan scenarios/default.json | grep -v 'search time' -->
    ```text
    ...what the command prints...
    ```
    <!-- end-osdp-output -->

The command after `osdp-output:` runs through `sh -c` from the repository root (--root), with
`osdp` on PATH meaning the binary given by --osdp (so a pipeline can filter the output, e.g. drop
a line with a wall-clock time). Its standard output, with trailing blanks stripped from every
line, is the block's text. Only commands that print the same bytes on every run and take a few
seconds belong under markers; outputs that need minutes stay plain text with their date and
commit written above them.

  doc_outputs.py --osdp build/release/cli/osdp --check   exit 1 and a unified diff when a
                                                          committed block differs
  doc_outputs.py --osdp build/release/cli/osdp --write   rewrite the blocks in place
  doc_outputs.py --list                                   the blocks, nothing run

Exit codes: 0 all blocks match (or were written), 1 a block differs (--check), 2 bad markers,
a command that failed or timed out, or bad arguments. Python 3 standard library only.
"""

import argparse
import concurrent.futures
import difflib
import glob
import os
import re
import subprocess
import sys
import tempfile

BEGIN = re.compile(r"^<!--\s*osdp-output:\s*(?P<command>.*?)\s*-->\s*$")
END = re.compile(r"^<!--\s*end-osdp-output\s*-->\s*$")
FENCE_OPEN = re.compile(r"^```[A-Za-z0-9_-]*\s*$")
FENCE_CLOSE = re.compile(r"^```\s*$")


class MarkerError(Exception):
    pass


class Block:
    """One marked block of a file: its command and the lines [first, last) of its text."""

    def __init__(self, path, command, marker_line, first, last, fence):
        self.path = path
        self.command = command
        self.marker_line = marker_line  # 1-based, for messages
        self.first = first  # index of the first text line (after the opening fence)
        self.last = last  # index of the closing fence
        self.fence = fence


def find_blocks(path, lines):
    blocks = []
    i = 0
    while i < len(lines):
        match = BEGIN.match(lines[i])
        if not match:
            if END.match(lines[i]):
                raise MarkerError(f"{path}:{i + 1}: end-osdp-output without an osdp-output marker")
            i += 1
            continue
        command = match.group("command")
        if not command:
            raise MarkerError(f"{path}:{i + 1}: osdp-output marker without a command")
        open_at = i + 1
        if open_at >= len(lines) or not FENCE_OPEN.match(lines[open_at]):
            raise MarkerError(f"{path}:{i + 1}: an osdp-output marker must be followed by a ``` fence")
        close_at = open_at + 1
        while close_at < len(lines) and not FENCE_CLOSE.match(lines[close_at]):
            if BEGIN.match(lines[close_at]) or END.match(lines[close_at]):
                raise MarkerError(f"{path}:{close_at + 1}: marker inside the block opened at line {i + 1}")
            close_at += 1
        if close_at >= len(lines):
            raise MarkerError(f"{path}:{i + 1}: the block's fence is never closed")
        end_at = close_at + 1
        if end_at >= len(lines) or not END.match(lines[end_at]):
            raise MarkerError(
                f"{path}:{close_at + 1}: the closing fence must be followed by <!-- end-osdp-output -->")
        blocks.append(Block(path, command, i + 1, open_at + 1, close_at, lines[open_at]))
        i = end_at + 1
    return blocks


def run_block(block, root, env, timeout_s):
    """The block's text as the current build prints it, or raises RuntimeError."""
    try:
        done = subprocess.run(["sh", "-c", block.command], cwd=root, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{block.path}:{block.marker_line}: `{block.command}` ran over {timeout_s} s")
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"{block.path}:{block.marker_line}: `{block.command}` exited "
                           f"{done.returncode}" + (f": {stderr}" if stderr else ""))
    text = done.stdout.decode("utf-8", "replace")
    out = [line.rstrip() + "\n" for line in text.rstrip("\n").split("\n")] if text.strip() else []
    if not out:
        raise RuntimeError(f"{block.path}:{block.marker_line}: `{block.command}` printed nothing")
    for line in out:
        if FENCE_CLOSE.match(line.rstrip("\n")) or line.startswith("```"):
            raise RuntimeError(f"{block.path}:{block.marker_line}: the output contains a ``` line")
    return out


def default_files(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.isfile(f)]


def write_atomically(path, lines):
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".doc_outputs.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.writelines(lines)
        os.chmod(temporary, os.stat(path).st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when a block differs")
    mode.add_argument("--write", action="store_true", help="rewrite every block from the current build")
    mode.add_argument("--list", action="store_true", help="list the blocks and their commands")
    parser.add_argument("--osdp", help="the osdp binary the commands run (default: ROOT/build/release/cli/osdp)")
    parser.add_argument("--root", help="repository root (default: this script's parent folder)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="commands run at once (default: up to 4)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a command may take (default 120)")
    parser.add_argument("files", nargs="*", help="markdown files (default: README.md and docs/*.md)")
    args = parser.parse_args()

    root = os.path.abspath(args.root or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = [os.path.abspath(f) for f in args.files] or default_files(root)

    documents = {}
    blocks = []
    try:
        for path in files:
            with open(path, encoding="utf-8", newline="") as handle:
                lines = handle.readlines()
            documents[path] = lines
            blocks += find_blocks(os.path.relpath(path, root), [line.rstrip("\r\n") for line in lines])
    except (OSError, MarkerError) as error:
        print(f"doc_outputs.py: {error}", file=sys.stderr)
        return 2

    if args.list:
        for block in blocks:
            print(f"{block.path}:{block.marker_line}: {block.command}")
        return 0
    if not blocks:
        print("doc_outputs.py: no osdp-output blocks found", file=sys.stderr)
        return 2

    osdp = os.path.abspath(args.osdp or os.path.join(root, "build", "release", "cli", "osdp"))
    if not (os.path.isfile(osdp) and os.access(osdp, os.X_OK)):
        print(f"doc_outputs.py: {osdp}: not an executable osdp (build it, or give --osdp)", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="osdp-doc-outputs.") as bin_dir:
        # `osdp` in a block's command is the binary under test, wherever it sits in a pipeline.
        os.symlink(osdp, os.path.join(bin_dir, "osdp"))
        env = dict(os.environ)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        env["LC_ALL"] = "C"
        env["OSDP"] = osdp
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_block, block, root, env, args.timeout) for block in blocks]
            outputs, failures = [], []
            for future in futures:
                try:
                    outputs.append(future.result())
                except RuntimeError as error:
                    outputs.append(None)
                    failures.append(str(error))
    if failures:
        for failure in failures:
            print(f"doc_outputs.py: {failure}", file=sys.stderr)
        return 2

    stale = 0
    by_file = {}
    for block, output in zip(blocks, outputs):
        by_file.setdefault(block.path, []).append((block, output))
    for rel, pairs in by_file.items():
        path = os.path.join(root, rel)
        lines = documents[path]
        new_lines = list(lines)
        # Replace from the last block up, so that earlier indices stay valid.
        for block, output in reversed(pairs):
            committed = [line.rstrip("\r\n") + "\n" for line in lines[block.first:block.last]]
            if committed == output:
                continue
            stale += 1
            if args.check:
                sys.stdout.writelines(difflib.unified_diff(
                    committed, output, fromfile=f"{rel}:{block.marker_line} (committed)",
                    tofile=f"{rel}:{block.marker_line} (`{block.command}` now)"))
            new_lines[block.first:block.last] = output
        if args.write and new_lines != lines:
            write_atomically(path, new_lines)
            print(f"rewrote {rel}")

    if args.check and stale:
        print(f"\n{stale} of {len(blocks)} shown osdp outputs differ from what this build prints; "
              f"regenerate them with scripts/update-docs.sh (python3 scripts/doc_outputs.py --write)")
        return 1
    verb = "rewritten" if args.write and stale else "match the current build"
    count = stale if args.write and stale else len(blocks)
    print(f"{count} of {len(blocks)} shown osdp outputs in {len(by_file)} files {verb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
