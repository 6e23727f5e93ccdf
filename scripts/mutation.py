"""`make mutation`: mutation testing of the pure-Python modules whose tests are quick.

For each module, mutmut (3.x) runs that module's own tests against every mutant, in a copy of
the working tree (its `mutants/` folder, so the editable install of the project never stands
in for the mutated copy: pytest puts the copy's root first on sys.path). Prints the score per
module and lists the survivors that are not yet reviewed:

    killed / (mutants - reviewed equivalents)     "no tests" mutants count as survivors

A survivor is reviewed by naming it in docs/testing.md's "Equivalent mutants" section, with why
no output can change; the rest need a test that kills them. A mutant that makes the tests hang
(mutmut's "timeout") counts as killed.

    python scripts/mutation.py                    # every module
    python scripts/mutation.py textsplit audio    # some
    python scripts/mutation.py --show textsplit   # and the diff of each unreviewed survivor
    python scripts/mutation.py handmade           # the hand-made kernel and fast-path mutants
    python scripts/mutation.py handmade --only life:   # those of a request's life

The C++ kernels and the fast decode path are mutated by hand instead (scripts/handmade_mutants.py:
dropped tails, wrong constants, cross-row reads); each must make its tests fail.

The copy stays in $TMPDIR/ownvoice-mutation/<module> until the next run, so that
`mutmut show <name>` can be run there.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
TARGET = 0.90

# module -> its own quick tests
MODULES = {
    "textsplit": ("ownvoice/textsplit.py", ["tests/test_textsplit.py",
                                            "tests/server/test_streamed_text.py"]),
    "audio": ("ownvoice/audio.py", ["tests/test_audio.py"]),
    "voices": ("ownvoice/service/library.py", ["tests/server/test_voices.py"]),
    "errors": ("ownvoice/server/errors.py", ["tests/server/test_errors.py"]),
    "settings": ("ownvoice/server/settings.py", ["tests/server/test_settings.py"]),
    "plan": ("ownvoice/audiobook/plan.py", ["tests/audiobook/test_plan.py",
                                             "tests/audiobook/test_readers.py"]),
    "workdir": ("ownvoice/audiobook/workdir.py", ["tests/audiobook/test_workdir.py"]),
    "encode": ("ownvoice/service/encode.py", ["tests/server/test_encode.py"]),
}  # fmt: skip


def copy_tree(work: Path) -> None:
    """The tracked files of the working tree (as they are now, edits included) into `work`."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (work / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / name.decode())


def equivalents() -> set[str]:
    """Mutant names reviewed as equivalent, from docs/testing.md."""
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    section = text.partition("## Equivalent mutants")[2].partition("\n## ")[0]
    return set(re.findall(r"`(ownvoice\.[\w.]+)`", section))


def run(module: str, mutmut: str, show: bool) -> tuple[int, int, list[str]]:
    """(killed, counted, unreviewed survivors) of one module."""
    path, tests = MODULES[module]
    work = Path(tempfile.gettempdir()) / "ownvoice-mutation" / module
    copy_tree(work)
    config = (
        "\n[tool.mutmut]\n"
        f'source_paths = ["{path}"]\n'
        'also_copy = ["ownvoice/", "tests/", "README.md", "config.example.yaml", "docs/"]\n'
        f"pytest_add_cli_args_test_selection = {tests!r}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
    ).replace("'", '"')
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(config)
    subprocess.run([mutmut, "run"], cwd=work, capture_output=True, check=False)
    out = subprocess.run(
        [mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True
    ).stdout
    statuses = dict(re.findall(r"^\s*([\w.]+): (.+?)\s*$", out, re.M))
    reviewed = equivalents()
    # a mutant that makes the tests hang is noticed as surely as one that fails them
    killed = sum(s in ("killed", "timeout") and n not in reviewed for n, s in statuses.items())
    counted = sum(name not in reviewed for name in statuses)
    survivors = sorted(
        n for n, s in statuses.items() if s not in ("killed", "timeout") and n not in reviewed
    )
    for name in survivors:
        print(f"    {statuses[name]}: {name}")
        if show:
            diff = subprocess.run([mutmut, "show", name], cwd=work, capture_output=True, text=True)
            print("\n".join("        " + line for line in diff.stdout.splitlines()[2:]))
    return killed, counted, survivors


def run_handmade(show: bool, only: str = "") -> tuple[int, int, list[str]]:
    """Each hand-made mutant applied alone in a copy of the tree; killed when its tests fail.
    `only`: those whose name contains it."""
    from handmade_mutants import MUTANTS

    MUTANTS = [m for m in MUTANTS if only in m.name]  # noqa: N806

    work = Path(tempfile.gettempdir()) / "ownvoice-mutation" / "handmade"
    copy_tree(work)
    env = {
        **os.environ,
        "PYTHONPATH": str(work),  # the copy, not the editable install
        # kernel builds of its own, kept between runs (each build is named by its source's hash)
        "TORCH_EXTENSIONS_DIR": str(work.parent / "torch_extensions"),
        "OWNVOICE_REQUIRE_REFERENCE": "1",
    }

    def tests_fail(tests: list[str]) -> bool:
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode < 0:  # killed by a signal: a crash is noticed too
            return True
        if done.returncode not in (0, 1):
            sys.exit(f"pytest could not run {tests} ({done.returncode}):\n{done.stdout[-2000:]}")
        return done.returncode == 1

    if tests_fail(sorted({t for m in MUTANTS for t in m.tests})):
        sys.exit("the unmutated tree fails the hand-made mutants' tests: fix that first")
    killed, survivors = 0, []
    for mutant in MUTANTS:
        path = work / mutant.path
        original = path.read_text(encoding="utf-8")
        if original.count(mutant.old) != 1:
            sys.exit(f"{mutant.name}: its text is not found exactly once in {mutant.path}")
        path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
        try:
            caught = tests_fail(mutant.tests)
        finally:
            path.write_text(original, encoding="utf-8")
        killed += caught
        print(f"    {'killed' if caught else 'SURVIVED'}: {mutant.name}", flush=True)
        if not caught:
            survivors.append(mutant.name)
            if show:
                print(f"        {mutant.path}: {mutant.old!r} -> {mutant.new!r}")
    return killed, len(MUTANTS), survivors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument(
        "--only", default="", help="hand-made mutants whose name contains this (e.g. 'life:')"
    )
    parser.add_argument(
        "modules", nargs="*", help=f"some of: {', '.join(MODULES)}, handmade (default all)"
    )
    args = parser.parse_args(argv)
    unknown = set(args.modules) - set(MODULES) - {"handmade"}
    if unknown:
        parser.error(f"unknown module(s): {', '.join(sorted(unknown))}")
    mutmut = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    rows, failed = [], False
    for module in args.modules or [*MODULES, "handmade"]:
        if module == "handmade":
            killed, counted, _ = run_handmade(args.show, args.only)
        else:
            killed, counted, _ = run(module, mutmut, args.show)
        score = killed / counted if counted else 1.0
        failed |= score < TARGET
        rows.append((module, killed, counted, score))
        print(f"{module:10} {killed:4d} / {counted:4d} killed  {score:6.1%}\n", flush=True)
    print("\nmodule      killed / counted   score   (target >= 90 % of non-equivalent mutants)")
    for module, killed, counted, score in rows:
        print(f"{module:10} {killed:6d} / {counted:<7d} {score:6.1%}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
