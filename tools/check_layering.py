#!/usr/bin/env python3
"""The layering rule of csrc/: folders in data-flow order (DESIGN.md's layout), each including only itself
and the folders before it (a sub-folder counts as its top folder: scheduler/pointwise is scheduler).
Two more rules keep the scheduler table the only list of schedulers: no file outside scheduler/ includes
a scheduler kind's header (scheduler/<kind>/...), and DeviceInfo (target/) comes before the schedulers,
so codegen, device and exec reach it without them. Prints every include that breaks a rule, with its
file and line, and exits 1 if there is one. `make test` runs it."""

import pathlib
import re
import sys

ORDER = ["support", "ir", "target", "reference", "passes", "kernel", "scheduler", "segmenter", "codegen", "device", "exec"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent / "csrc"
    rank = {name: i for i, name in enumerate(ORDER)}
    problems = []
    device_info = sorted(p.relative_to(root).parts[0] for p in root.rglob("device_info.h"))
    if device_info != ["target"] or rank["target"] > rank["scheduler"]:
        problems.append(f"DeviceInfo's header is in {device_info}: it belongs in target/, before scheduler/")
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
            parts = match.group(1).split("/")
            target = parts[0]
            if target == "scheduler" and len(parts) > 2 and folder != "scheduler":
                problems.append(f"{path.relative_to(root)}:{number}: includes {match.group(1)}, a scheduler kind's "
                                "header; outside scheduler/, schedulers are reached through scheduler/scheduler.h")
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
