#!/usr/bin/env python3
"""The layering rule of csrc/: folders in data-flow order, each including only itself and the folders
before it (a sub-folder counts as its top folder: scheduler/pointwise is scheduler). Prints every
include that breaks the rule, with its file and line, and exits 1 if there is one. `make test` runs it."""

import pathlib
import re
import sys

ORDER = ["support", "ir", "target", "reference", "passes", "kernel", "scheduler", "segmenter", "codegen", "device", "exec"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent / "csrc"
    rank = {name: i for i, name in enumerate(ORDER)}
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp", ".inc"):
            continue
        folder = path.relative_to(root).parts[0]
        if folder not in rank:
            problems.append(f"{path.relative_to(root)}: folder {folder!r} is not in the layering order")
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match or "/" not in match.group(1):
                continue
            target = match.group(1).split("/")[0]
            if target not in rank:
                problems.append(f"{path.relative_to(root)}:{number}: includes {match.group(1)}, outside the known folders")
            elif rank[target] > rank[folder]:
                problems.append(f"{path.relative_to(root)}:{number}: {folder}/ includes {match.group(1)}, "
                                f"from {target}/, which comes later ({' -> '.join(ORDER)})")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
