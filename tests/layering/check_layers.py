#!/usr/bin/env python3
"""Every project include against the layer order of docs/architecture.md.

The order is the fenced ```layers block there: one layer per line, bottom first, each a list of
folders. A file may include files of its own layer and of the layers below it; the file's folder
is the longest listed folder that contains it. Every folder holding C++ or CUDA sources must be
listed, so a new folder gets a place before it gets code. Exit status 1 names each include that
goes up, as FILE:LINE: "INCLUDE" (layer N) goes up from layer M.

--self-test runs the check on a small made-up tree with one include going up and one unlisted
folder, and fails unless both are reported.
"""
import argparse
import pathlib
import re
import sys
import tempfile

SOURCE_SUFFIXES = {".cc", ".h", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIPPED_DIRS = {".git", ".deps", "build", "out", "third_party"}


def read_layers(architecture: pathlib.Path) -> list[list[str]]:
    text = architecture.read_text()
    match = re.search(r"```layers\n(.*?)```", text, re.S)
    if not match:
        sys.exit(f"{architecture}: no ```layers block")
    layers = []
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            layers.append(line.split())
    return layers


def layer_of(path: str, folders: dict[str, int]) -> tuple[int, str] | None:
    best = None
    for folder, layer in folders.items():
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best[1])):
            best = (layer, folder)
    return best


def source_files(root: pathlib.Path):
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in SKIPPED_DIRS or rel.parts[0].startswith((".venv", "build")):
            continue
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            yield rel


def check(root: pathlib.Path, architecture: pathlib.Path) -> list[str]:
    layers = read_layers(architecture)
    folders = {folder: i for i, line in enumerate(layers) for folder in line}
    problems = []
    for rel in source_files(root):
        own = layer_of(rel.as_posix(), folders)
        if own is None:
            problems.append(f"{rel}: its folder is in no layer of {architecture.name}")
            continue
        for number, line in enumerate((root / rel).read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = layer_of(match.group(1), folders)
            if target is not None and target[0] > own[0]:
                problems.append(
                    f'{rel}:{number}: "{match.group(1)}" ({target[1]}, layer {target[0]}) goes '
                    f"up from {own[1]} (layer {own[0]})")
    return problems


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "docs").mkdir()
        (root / "docs/architecture.md").write_text("```layers\nlow\nhigh  # top\n```\n")
        for rel, text in {
            "low/a.h": '#include "high/b.h"\n',  # goes up
            "high/b.h": '#include "low/a.h"\n#include <vector>\n',
            "elsewhere/c.cc": "",  # unlisted folder
        }.items():
            (root / rel).parent.mkdir(exist_ok=True)
            (root / rel).write_text(text)
        problems = check(root, root / "docs/architecture.md")
    expected = ['low/a.h:1: "high/b.h"', "elsewhere/c.cc: its folder is in no layer"]
    missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
    if missing or len(problems) != len(expected):
        print("self-test failed; reported:", *problems, sep="\n  ")
        return 1
    print("self-test: both violations reported")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).parents[2])
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = check(args.root, args.root / "docs/architecture.md")
    for problem in problems:
        print(problem)
    files = sum(1 for _ in source_files(args.root))
    print(f"{files} files, {len(problems)} includes against the layer order")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
