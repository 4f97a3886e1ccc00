#!/usr/bin/env python3
"""Arrows only downwards: a host layer may import (`crate::LAYER`) only layers ranked below it, or
its own folder. Folders of one rank may not import each other. Prints every climbing import and
exits 1 if there is any.

Ranks (README, Architecture): error < util, shared (constants shared with the device crate) < tensor < graph < format < gpu < ops < nn <
task < sample/dist < bench < cli (the binary: host/main.rs and host/cli/, which see the library as
`tcgnn::`). A task (its split, head, loss, metric and loop) sits below sample and dist because
they are ways of running one: the sampler implements node classification's `EpochSteps` and
`Evaluate`, partitioning trains its `Dataset` into its records; neither names the other, and the
CLI composes model x task x sampler x partitioning. A file's `#[cfg(test)]` tail is not checked: unit tests may build inputs with layers
above the one they test.

Inside a layer, the sub-folders (`ops/nn`, `ops/backend`, `nn/models`, ...; the layer's own files
are its root, `ops`) may import each other, but not in a circle: each circle is printed. A circle
in KNOWN_LOOPS is listed as still to break; any other fails the check, and so does a listed one
that is gone (take it off the list, so that it cannot come back unnoticed)."""
import pathlib
import re
import sys

RANK = {
    "error": 0, "util": 1, "shared": 1, "tensor": 2,
    "graph": 3, "format": 4, "gpu": 5, "ops": 6, "nn": 7,
    "task": 8, "sample": 9, "dist": 9,
    "bench": 10, "cli": 11,
}
ROOT = pathlib.Path(__file__).resolve().parent.parent / "host"
# Circles between sub-folders of one layer still to break, each as its sorted folders: none
# since issue 41 broke the last (`ops/backend <-> ops/nn`: the backends now name no op; `Ops`
# lives in `ops/nn/all.rs` and the ops keep their scratch in the backend's `OpState`).
KNOWN_LOOPS: set[tuple[str, ...]] = set()
# `crate::x` (library) or `tcgnn::x` (the binary's view of the library), in use lines and paths.
REF = re.compile(r"\b(?:crate|tcgnn)::([a-z_]+)")


def layer_of(path: pathlib.Path) -> str | None:
    rel = path.relative_to(ROOT).parts
    if len(rel) == 1:
        stem = rel[0][:-3]
        return stem if stem in RANK else None
    return rel[0]


def folder_of(path: pathlib.Path) -> str | None:
    """The layer sub-folder a file belongs to (`ops/nn`), or the layer's root (`ops`)."""
    rel = path.relative_to(ROOT).parts
    if len(rel) == 1:
        return None
    if len(rel) == 2:
        return rel[0]
    return f"{rel[0]}/{rel[1]}"


# `crate::layer::sub::...`: the folder a path names (`ops/nn` where host/ops/nn is a folder).
PATH = re.compile(r"\b(?:crate|tcgnn)::([a-z_]+)(?:::([a-z_]+))?")


def target_folder(layer: str, sub: str | None) -> str:
    if sub and (ROOT / layer / sub).is_dir():
        return f"{layer}/{sub}"
    return layer


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def loops(texts: dict[pathlib.Path, str]) -> int:
    """Prints the circles between sub-folders of one layer; returns how many fail the check."""
    edges: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for path, code in texts.items():
        me = folder_of(path)
        if me is None:
            continue
        layer = me.split("/")[0]
        for m in PATH.finditer(code):
            if m.group(1) != layer:
                continue
            other = target_folder(layer, m.group(2))
            if other != me:
                edges.setdefault(me, set()).add(other)
                line = code[: m.start()].count("\n") + 1
                why.setdefault((me, other), f"{path.relative_to(ROOT.parent)}:{line}")
    failed = 0
    found = set()
    for comp in circles(edges):
        key = tuple(comp)
        found.add(key)
        known = key in KNOWN_LOOPS
        failed += not known
        print(f"{'known (to break)' if known else 'NEW'} import circle: {' <-> '.join(comp)}")
        for a in comp:
            for b in comp:
                if (a, b) in why:
                    print(f"    {a} -> {b} (first at {why[(a, b)]})")
    for key in sorted(KNOWN_LOOPS - found):
        print(f"gone: {' <-> '.join(key)} (take it off KNOWN_LOOPS)")
        failed += 1
    return failed


def main() -> int:
    bad = []
    texts = {}
    for path in sorted(ROOT.rglob("*.rs")):
        me = layer_of(path)
        if me is None:
            continue
        text = path.read_text().split("#[cfg(test)]")[0]
        # Doc comments and ordinary comments name other layers freely.
        code = "\n".join(line.split("//")[0] for line in text.splitlines())
        texts[path] = code
        for m in REF.finditer(code):
            other = m.group(1)
            if other not in RANK or other == me:
                continue
            if RANK[other] >= RANK[me]:
                line = code[: m.start()].count("\n") + 1
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {me} (rank {RANK[me]}) imports {other} (rank {RANK[other]})")
    for b in bad:
        print(b)
    failed = loops(texts)
    if bad:
        print(f"arrows: {len(bad)} import(s) climb a layer or cross to a folder of the same rank", file=sys.stderr)
    if failed:
        print(f"arrows: {failed} import circle(s) between sub-folders of a layer not in KNOWN_LOOPS, or listed and gone", file=sys.stderr)
    if bad or failed:
        return 1
    print("arrows: every import points downwards; no new circle inside a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
