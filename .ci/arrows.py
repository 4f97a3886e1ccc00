#!/usr/bin/env python3
"""Arrows only downwards: a host layer may import (`crate::LAYER`) only layers ranked below it, or
its own folder. Folders of one rank may not import each other. Prints every climbing import and
exits 1 if there is any.

Ranks (README, Architecture): error < util, shared (constants shared with the device crate) < tensor < graph < format < gpu < ops < nn <
task/sample/dist < bench < cli (the binary: host/main.rs and host/cli/, which see the library as
`tcgnn::`). A file's `#[cfg(test)]` tail is not checked: unit tests may build inputs with layers
above the one they test."""
import pathlib
import re
import sys

RANK = {
    "error": 0, "util": 1, "shared": 1, "tensor": 2,
    "graph": 3, "format": 4, "gpu": 5, "ops": 6, "nn": 7,
    "task": 8, "sample": 8, "dist": 8,
    "bench": 9, "cli": 10,
}
ROOT = pathlib.Path(__file__).resolve().parent.parent / "host"
# `crate::x` (library) or `tcgnn::x` (the binary's view of the library), in use lines and paths.
REF = re.compile(r"\b(?:crate|tcgnn)::([a-z_]+)")


def layer_of(path: pathlib.Path) -> str | None:
    rel = path.relative_to(ROOT).parts
    if len(rel) == 1:
        stem = rel[0][:-3]
        return stem if stem in RANK else None
    return rel[0]


def main() -> int:
    bad = []
    for path in sorted(ROOT.rglob("*.rs")):
        me = layer_of(path)
        if me is None:
            continue
        text = path.read_text().split("#[cfg(test)]")[0]
        # Doc comments and ordinary comments name other layers freely.
        code = "\n".join(line.split("//")[0] for line in text.splitlines())
        for m in REF.finditer(code):
            other = m.group(1)
            if other not in RANK or other == me:
                continue
            if RANK[other] >= RANK[me]:
                line = code[: m.start()].count("\n") + 1
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {me} (rank {RANK[me]}) imports {other} (rank {RANK[other]})")
    for b in bad:
        print(b)
    if bad:
        print(f"arrows: {len(bad)} import(s) climb a layer or cross to a folder of the same rank", file=sys.stderr)
        return 1
    print("arrows: every import points downwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
