#!/usr/bin/env python3
"""Checks that imports inside each crate run one way: down the layers its modules declare.

A module with submodules (a crate's lib.rs, a `foo/mod.rs`, or a `foo.rs` beside a `foo/`
folder) may declare the order of its child modules in its top `//!` doc:

    //! ## Layers
    //!
    //! 1. `config`, `context` — the configuration and the shared data
    //! 2. `kube` — watches, object builders
    //! 3. `ops` (apart) — operation families, none importing another
    //! 4. `provider` — the `Provider` impl

Each numbered item is a layer, lowest first; the module names are the backticked names before
the first ` — `; `(apart)` there means the layer's modules may not import each other. Every
child module must be listed once (modules under `#[cfg(test)]` excepted: tests may reach
anything). Then a path `crate::…`, `super::…` or `self::…` (in a `use` tree or in code) written
in a file under child `x` that names child `y` of the same declaring module is an error when
`y`'s layer is above `x`'s, or beside it in an apart layer. A name the declaring module
re-exports (`pub use crate::y::Name`) counts as `y`; an item defined in the declaring module
itself is an error when a child imports it (a declaring module holds declarations and
re-exports, so nothing below can lean on it).

Run: `scripts/check-layers.py [CRATES_DIR]` (default: crates/ beside this script) — exits 1
naming each wrong import by file, line, and the two layers. `--self-test` plants upward
imports in small made-up crates and in copies of the real crates, and fails unless each is
caught (scripts/test.sh runs both).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Crates whose layer order issue 43 asks to be written down and checked.
REQUIRED = ("provider-kube", "replay", "analyze")

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_code(text: str) -> str:
    """The text with comments, string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)

    def blank(s: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append(blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), else a lifetime or label.
            m = re.compile(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'").match(text, i)
            if m:
                out.append(blank(m.group(0)))
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass
class Layers:
    """One declaring module's layer order."""

    file: Path
    order: dict[str, int] = field(default_factory=dict)  # child -> layer index
    apart: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


def parse_layers(path: Path, text: str) -> Layers | None:
    doc = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//!"):
            doc.append(s[3:].strip())
        elif s == "" or s.startswith("#![") or s.startswith("//"):
            if s.startswith("#![") or s.startswith("//"):
                continue
            continue
        else:
            break
    try:
        start = next(i for i, d in enumerate(doc) if re.fullmatch(r"#+\s*Layers", d))
    except StopIteration:
        return None
    layers = Layers(path)
    level = -1
    for d in doc[start + 1 :]:
        if re.match(r"#+\s", d):
            break
        m = re.match(r"(\d+)\.\s+(.*)", d)
        if not m:
            continue
        level += 1
        head = m.group(2).split(" — ")[0]
        if "(apart" in head:
            layers.apart.add(level)
        for name in re.findall(r"`(" + IDENT + r")`", head):
            if name in layers.order:
                layers.errors.append(f"{path}: `{name}` is listed in two layers")
            layers.order[name] = level
    if level < 0:
        layers.errors.append(f"{path}: a `Layers` heading with no numbered layers under it")
    return layers


@dataclass
class ModFile:
    path: Path
    module: tuple[str, ...]
    text: str  # stripped
    raw: str


def module_files(src: Path) -> list[ModFile]:
    """Every file of the library's module tree (src/main.rs and src/bin/ are other crates)."""
    files = []
    for p in sorted(src.rglob("*.rs")):
        rel = p.relative_to(src)
        parts = list(rel.parts)
        if parts[0] == "bin" or rel.as_posix() == "main.rs":
            continue
        if parts[-1] in ("lib.rs",) and len(parts) == 1:
            mod: tuple[str, ...] = ()
        elif parts[-1] == "mod.rs":
            mod = tuple(parts[:-1])
        else:
            mod = tuple(parts[:-1]) + (parts[-1][:-3],)
        raw = p.read_text(encoding="utf-8")
        files.append(ModFile(p, mod, strip_code(raw), raw))
    return files


MOD_DECL = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])", re.M)


def child_modules(f: ModFile) -> tuple[set[str], set[str]]:
    """The file's child modules, and those of them under `#[cfg(test)]`."""
    children, tests = set(), set()
    for m in MOD_DECL.finditer(f.text):
        name = m.group(1)
        attrs = []
        for b in reversed(f.text[: m.start()].rstrip().splitlines()):
            if not b.strip().startswith("#["):
                break
            attrs.append(b)
        if any("cfg(test)" in b for b in attrs) or (
            name in ("tests", "test") and m.group(2) == "{"
        ):
            tests.add(name)
        children.add(name)
    return children, tests


def reexports(f: ModFile) -> dict[str, str]:
    """Names a declaring module re-exports, to the child they come from."""
    out: dict[str, str] = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", f.text):
        for path, alias in expand_use(m.group(1)):
            segs = list(path)
            if segs and segs[0] in ("crate", "self"):
                segs = segs[1:]
            if segs:
                out[alias or segs[-1]] = segs[0]
    return out


def expand_use(tree: str, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str | None]]:
    """`a::{b, c::{d as e}}` → [(a,b), (a,c,d as e)]; `*` kept as a segment."""
    tree = tree.strip()
    out = []
    # Split off a leading path before `{`.
    if "{" in tree and (tree.find("{") < tree.find(",") or "," not in tree.split("{")[0]):
        head, _, rest = tree.partition("{")
        body = rest[: rest.rfind("}")]
        head_segs = tuple(s.strip() for s in head.split("::") if s.strip())
        depth, cur = 0, ""
        for ch in body:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                if cur.strip():
                    out += expand_use(cur, prefix + head_segs)
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out += expand_use(cur, prefix + head_segs)
        return out
    alias = None
    m = re.match(r"(.*)\s+as\s+(" + IDENT + r")$", tree, re.S)
    if m:
        tree, alias = m.group(1), m.group(2)
    segs = tuple(s.strip() for s in tree.split("::") if s.strip())
    if segs == ("self",):
        return [(prefix, alias)]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    return [(prefix + segs, alias)]


def inline_modules(text: str) -> list[tuple[int, int, str]]:
    """(start, end, name) spans of inline `mod name { … }` blocks."""
    spans = []
    for m in MOD_DECL.finditer(text):
        if m.group(2) != "{":
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        spans.append((m.start(), j, m.group(1)))
    return spans


def module_at(f: ModFile, spans, pos: int) -> tuple[str, ...]:
    mod = f.module
    for s, e, name in spans:
        if s <= pos < e:
            mod = mod + (name,)
    return mod


PATH = re.compile(r"(?<![\w$:])(crate|super|self)((?:\s*::\s*(?:" + IDENT + r"|\*))+)")


def imports(f: ModFile):
    """(line, module of the importing code, absolute path) for every crate-relative path."""
    text = re.sub(r"\bpub\s*\(\s*in\s+[^)]*\)", lambda m: " " * len(m.group(0)), f.text)
    spans = inline_modules(text)
    seen = []
    use_spans = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        use_spans.append((m.start(), m.end()))
        here = module_at(f, spans, m.start())
        line = text.count("\n", 0, m.start()) + 1
        for path, _ in expand_use(m.group(1)):
            if path and path[0] in ("crate", "super", "self"):
                seen.append((line, here, resolve(here, path)))
    for m in PATH.finditer(text):
        if any(s <= m.start() < e for s, e in use_spans):
            continue
        here = module_at(f, spans, m.start())
        line = text.count("\n", 0, m.start()) + 1
        segs = (m.group(1),) + tuple(s.strip() for s in m.group(2).split("::") if s.strip())
        seen.append((line, here, resolve(here, segs)))
    return seen


def resolve(here: tuple[str, ...], segs: tuple[str, ...]) -> tuple[str, ...] | None:
    out = list(here)
    segs = list(segs)
    if segs[0] == "crate":
        out, segs = [], segs[1:]
    while segs and segs[0] in ("super", "self"):
        if segs[0] == "super":
            if not out:
                return None
            out.pop()
        segs = segs[1:]
    return tuple(out + segs)


def check_crate(crate: Path, required: bool) -> list[str]:
    src = crate / "src"
    if not (src / "lib.rs").exists():
        return [f"{crate}: no src/lib.rs"] if required else []
    files = module_files(src)
    by_module = {f.module: f for f in files}
    errors: list[str] = []
    declaring: dict[tuple[str, ...], tuple[Layers, set[str], set[str], dict[str, str]]] = {}
    for f in files:
        layers = parse_layers(f.path, f.raw)
        if layers is None:
            continue
        errors += layers.errors
        children, tests = child_modules(f)
        for c in sorted(children - tests - set(layers.order)):
            errors.append(f"{f.path}: child module `{c}` is in no layer of its `Layers` list")
        for c in sorted(set(layers.order) - children):
            errors.append(f"{f.path}: `Layers` lists `{c}`, which is not a child module")
        declaring[f.module] = (layers, children, tests, reexports(f))
    # Which children each declaring module's own code (not its `pub use` re-exports) uses: an
    # item it defines is then above them, and a child importing it closes a circle.
    own_uses: dict[tuple[str, ...], set[str]] = {}
    for dmod, (layers, children, tests, _) in declaring.items():
        f = by_module[dmod]
        text = re.sub(r"\bpub(?:\([^)]*\))?\s+use\s+[^;]+;", "", f.text)
        used = set()
        for _, here, target in imports(ModFile(f.path, f.module, text, f.raw)):
            if here == dmod and target and len(target) > len(dmod) and target[: len(dmod)] == dmod:
                if target[len(dmod)] in children - tests:
                    used.add(target[len(dmod)])
        # Plain paths without `crate::` (`ops::dispatch(…)`) name children too.
        for c in children - tests:
            if re.search(r"(?<![\w:])" + c + r"\s*::", text):
                used.add(c)
        own_uses[dmod] = used
    if required and () not in declaring:
        errors.append(f"{src / 'lib.rs'}: the crate's top doc declares no `## Layers`")
    for f in files:
        for line, here, target in imports(f):
            if target is None:
                continue
            for dmod, (layers, children, tests, reexp) in declaring.items():
                n = len(dmod)
                if here[:n] != dmod or len(here) <= n or target[:n] != dmod:
                    continue
                src_child = here[n]
                if src_child in tests or src_child not in layers.order:
                    continue
                if len(target) <= n:
                    continue  # the declaring module itself (a glob of it, say)
                name = target[n]
                if name in children:
                    dst_child = name
                elif name in reexp and reexp[name] in children:
                    dst_child = reexp[name]
                elif name == "*":
                    continue
                elif not own_uses.get(dmod):
                    continue  # an item of a declaring module that leans on no child: a floor
                else:
                    where = by_module.get(dmod)
                    errors.append(
                        f"{f.path}:{line}: `{src_child}` imports `{name}` from "
                        f"{where.path if where else dmod}, the declaring module itself, whose "
                        f"own code uses {sorted(own_uses[dmod])}: a circle; move it into a layer"
                    )
                    continue
                if dst_child == src_child or dst_child in tests:
                    continue
                a, b = layers.order[src_child], layers.order.get(dst_child)
                if b is None:
                    continue
                if b > a or (a == b and a in layers.apart):
                    how = "an apart layer" if a == b else f"layer {b + 1} above its layer {a + 1}"
                    errors.append(
                        f"{f.path}:{line}: `{src_child}` (layer {a + 1}) imports "
                        f"`{'::'.join(target)}` from `{dst_child}`, {how} "
                        f"(declared in {layers.file})"
                    )
    return errors


def check_all(crates_dir: Path) -> list[str]:
    errors = []
    for crate in sorted(p for p in crates_dir.iterdir() if (p / "Cargo.toml").exists()):
        errors += check_crate(crate, crate.name in REQUIRED)
    missing = [c for c in REQUIRED if not (crates_dir / c / "Cargo.toml").exists()]
    errors += [f"{crates_dir}/{c}: required crate not found" for c in missing]
    return errors


# ---------------------------------------------------------------------------------------------
# Self-test: every planted upward import must be caught; the clean versions must pass.


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


LIB = """//! A made-up crate.
//!
//! ## Layers
//!
//! 1. `base` — ground floor
//! 2. `ops` (apart) — `a` and `b` never import each other
//! 3. `top`, `b2` — the top

mod base;
mod ops;
mod top;
mod b2;
#[cfg(test)]
mod tests;
pub use crate::top::Top;
"""

CLEAN = {
    "Cargo.toml": "[package]\nname = \"made\"\n",
    "src/lib.rs": LIB,
    "src/base.rs": "pub struct Base;\nfn f() -> &'static str { \"use crate::top::Top;\" }\n",
    "src/ops.rs": "use crate::base::Base;\npub struct Ops;\n",
    "src/b2.rs": "use crate::{base::Base, ops::Ops};\n",
    "src/top.rs": "use super::ops::Ops;\npub struct Top;\nfn g() { let _ = crate::base::Base; }\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    "src/tests.rs": "use crate::top::Top;\n",
}

PLANTS = {
    "use line": ("src/base.rs", "use crate::top::Top;\n"),
    "use tree": ("src/base.rs", "use crate::{ops::Ops as O, top::Top};\n"),
    "super path": ("src/ops.rs", "fn h() { let _ = super::b2::X; }\n"),
    "re-export": ("src/base.rs", "use crate::Top;\n"),
    "path in code": ("src/base.rs", "fn h() { crate::top::go(); }\n"),
    "same layer apart": ("src/ops/a.rs", "use crate::ops::b::B;\n"),
}


def self_test() -> int:
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        clean = write(tmp / "clean" / "made", CLEAN)
        errs = check_crate(clean, True)
        if errs:
            failures.append(f"the clean made-up crate fails: {errs}")
        for what, (rel, line) in PLANTS.items():
            root = tmp / what.replace(" ", "-") / "made"
            files = dict(CLEAN)
            if what == "same layer apart":
                files["src/ops.rs"] = "//! Ops.\n//!\n//! ## Layers\n//!\n//! 1. `a`, `b` (apart)\n\nmod a;\nmod b;\n"
                files["src/ops/b.rs"] = "pub struct B;\n"
                files["src/ops/a.rs"] = ""
            write(root, files)
            with open(root / rel, "a") as fh:
                fh.write(line)
            errs = check_crate(root, True)
            if not errs:
                failures.append(f"planted upward import not caught ({what}: {line.strip()!r} in {rel})")
        # An undeclared module; a declaring module whose item (leaning on a child) a lower
        # child imports: a circle.
        root = write(tmp / "undeclared" / "made", dict(CLEAN, **{"src/lib.rs": LIB + "mod extra;\n", "src/extra.rs": ""}))
        if not any("in no layer" in e for e in check_crate(root, True)):
            failures.append("a child module missing from the Layers list was not caught")
        root = write(tmp / "lean" / "made", dict(CLEAN, **{"src/lib.rs": LIB + "pub struct Ground(top::Top);\n", "src/base.rs": "use crate::Ground;\n"}))
        if not any("declaring module itself" in e for e in check_crate(root, True)):
            failures.append("an import of an item defined in the declaring module was not caught")
        # The real crates: clean as they are, and an upward import planted in the lowest layer
        # of each must be caught.
        crates_dir = Path(__file__).resolve().parent.parent / "crates"
        for name in REQUIRED:
            real = crates_dir / name
            copy = tmp / "real" / name
            shutil.copytree(real / "src", copy / "src")
            shutil.copy(real / "Cargo.toml", copy / "Cargo.toml")
            lib = (copy / "src" / "lib.rs").read_text()
            layers = parse_layers(copy / "src" / "lib.rs", lib)
            if layers is None or len(set(layers.order.values())) < 2:
                failures.append(f"{name}: no layers declared to plant an upward import in")
                continue
            low = min(layers.order, key=lambda c: layers.order[c])
            high = max(layers.order, key=lambda c: layers.order[c])
            low_file = copy / "src" / f"{low}.rs"
            if not low_file.exists():
                low_file = copy / "src" / low / "mod.rs"
            with open(low_file, "a") as fh:
                fh.write(f"\n#[allow(unused_imports)]\nuse crate::{high} as _planted_upward;\n")
            errs = check_crate(copy, True)
            if not any(f"imports `{high}`" in e for e in errs):
                failures.append(f"{name}: `use crate::{high}` planted in `{low}` was not caught: {errs}")
    for f in failures:
        print(f"check-layers self-test: FAILED: {f}")
    n = len(PLANTS) + 3 + len(REQUIRED)
    print(f"check-layers self-test: {n - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--self-test"]:
        return self_test()
    crates_dir = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "crates"
    errors = check_all(crates_dir)
    for e in errors:
        print(e)
    if errors:
        print(f"check-layers: {len(errors)} import(s) against the declared layers")
        return 1
    print("check-layers: every import runs down the declared layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
