#!/usr/bin/env python3
"""b2luigi's own test suite (its repository's ``tests/core``, ``tests/cli``, ``tests/batch``) run twice in the same
sitting: under the real b2luigi 1.3.0 (the peer venv of tests/peers/install.sh) and under b2batch through the shim
(a venv of its own: this checkout, the shim, and the same test tools). Issue 25's target: the suite passes through
the shim at least as often as under b2luigi itself.

b2luigi's tests are not on PyPI (its sdist has none) and are not copied into this repository: give a checkout of
b2luigi's repository at the release (``git clone https://github.com/belle2/b2luigi; git checkout v1.3.0``) with
``--repo``. Each side runs on a fresh copy of its ``tests`` folder (with the empty ``__init__.py`` files the
package-relative imports need), with pytest's JUnit XML, one pytest per test folder.

    python bench/b2luigi_own_tests.py --repo ~/src/b2luigi [--folders core,cli,batch] [--timeout 1800]

Prints per folder and side: passed, failed, errors, skipped; the tests that pass under b2luigi and not through
the shim (the differences to read), and those that pass only through the shim.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_TOOLS = ["pytest>=7", "typer>=0.12", "click>=8", "rich>=13", "shellingham>=1.5"]
#: b2luigi 1.3.0's own requirements for remote targets, which every b2luigi user has installed: through the
#: shim, b2luigi.WebDAVSystem then works through webdavclient3 as b2luigi's does, and the XRootD tests run.
SHIM_USER_PACKAGES = ["webdavclient3>=3.14.7", "xrootd>=5.7.0"]


def peers_root() -> Path:
    return Path(subprocess.run(["bash", str(ROOT / "tests" / "peers" / "install.sh"), "--print"], check=True,
                               capture_output=True, text=True).stdout.strip())


def ensure_venvs(root: Path) -> dict[str, Path]:
    real = root / "b2luigi" / "bin" / "python"
    if not real.exists():
        subprocess.run(["bash", str(ROOT / "tests" / "peers" / "install.sh")], check=True)
    pip = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([str(real), *pip, *TEST_TOOLS], check=True)
    shim_venv = root / "b2luigi-shim-tests"
    shim = shim_venv / "bin" / "python"
    if not shim.exists():
        subprocess.run([sys.executable, "-m", "venv", str(shim_venv)], check=True)
    subprocess.run([str(shim), *pip, "-e", str(ROOT), *TEST_TOOLS, *SHIM_USER_PACKAGES], check=True)
    subprocess.run([str(shim), *pip, "--no-deps", "--force-reinstall", str(ROOT / "compat" / "b2luigi-shim")],
                   check=True)
    return {"b2luigi 1.3.0": real, "b2batch shim": shim}


def fresh_copy(repo: Path, into: Path) -> Path:
    tests = into / "tests"
    shutil.copytree(repo / "tests", tests)
    for folder in [tests, *[p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"]]:
        (folder / "__init__.py").touch(exist_ok=True)
    return into


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome (passed, failed, error, skipped) by its id."""
    found: dict[str, str] = {}
    if not junit.exists():
        return found
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                       else "skipped" if "skipped" in kinds else "passed")
    return found


def run_side(python: Path, repo: Path, folder: str, timeout: float) -> tuple[dict[str, str], str]:
    with tempfile.TemporaryDirectory(prefix="b2luigi-own-tests-") as work:
        base = fresh_copy(repo, Path(work))
        junit = base / "junit.xml"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("B2BATCH_", "B2LUIGI_", "PYTHONPATH"))}
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
        try:
            done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:pylama",
                                   "--continue-on-collection-errors", f"--junitxml={junit}", f"tests/{folder}"],
                                  cwd=base, env=env, capture_output=True, text=True, timeout=timeout)
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["(no output)"]
        except subprocess.TimeoutExpired:
            tail = [f"timed out after {timeout:g} s"]
        return outcomes(junit), tail[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, type=Path, help="a checkout of b2luigi's repository (its tests/)")
    parser.add_argument("--folders", default="core,cli,batch", help="test folders (default core,cli,batch)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per pytest run")
    parser.add_argument("--show", type=int, default=40, help="differing tests listed per folder")
    args = parser.parse_args()
    if not (args.repo / "tests").is_dir():
        parser.error(f"{args.repo} has no tests folder: give a checkout of b2luigi's repository")
    sides = ensure_venvs(peers_root())
    totals = {side: {"passed": 0, "total": 0} for side in sides}
    for folder in [f.strip() for f in args.folders.split(",") if f.strip()]:
        results = {}
        for side, python in sides.items():
            found, tail = run_side(python, args.repo, folder, args.timeout)
            results[side] = found
            counts = {k: sum(1 for v in found.values() if v == k) for k in ("passed", "failed", "error", "skipped")}
            totals[side]["passed"] += counts["passed"]
            totals[side]["total"] += len(found)
            print(f"tests/{folder:6} {side:14} {len(found):4} tests: " + ", ".join(f"{v} {k}" for k, v in
                                                                             counts.items()) + f"   [{tail}]",
                  flush=True)
        real, shim = results.values()
        lost = sorted(t for t, o in real.items() if o == "passed" and shim.get(t) != "passed")
        gained = sorted(t for t, o in shim.items() if o == "passed" and real.get(t) != "passed")
        print(f"  pass under b2luigi, not through the shim: {len(lost)}")
        for name in lost[:args.show]:
            print(f"    {name} ({shim.get(name, 'not collected')})")
        print(f"  pass through the shim, not under b2luigi: {len(gained)}")
        for name in gained[:args.show]:
            print(f"    {name}")
    print("total: " + "; ".join(f"{side} {t['passed']} of {t['total']} passed" for side, t in totals.items()))
    real_passed, shim_passed = (t["passed"] for t in totals.values())
    print(f"target (issue 25): through the shim at least as often as under b2luigi: "
          f"{'met' if shim_passed >= real_passed else 'NOT met'} ({shim_passed} vs {real_passed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
