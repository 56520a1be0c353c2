#!/usr/bin/env bash
# Installs what the tests need (the package with its test extras and the drop-in shims, the real peers in
# venvs of their own, a local Slurm, a local Sun Grid
# Engine and a local XRootD server), then runs the whole test suite. Arguments go to pytest (e.g.
# -m "not slow" for the fast tier, which needs none of this: python3 -m pytest -m "not slow").
# The exit status is pytest's: "no tests ran" (5) fails too.
set -euo pipefail
cd "$(dirname "$0")/.."
# Under pyenv, pip ends with a rehash that fails (and so does pip) while a killed earlier rehash left its lock
# file behind: remove a lock older than two minutes (a live rehash takes well under a second).
if command -v pyenv > /dev/null; then
    find "$(pyenv root)/shims" -maxdepth 1 -name .pyenv-shim -mmin +2 -delete 2> /dev/null || true
fi
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# The drop-in shims (import b2luigi / joblib_htcondor / pypoolparty): their dependencies are b2batch, installed
# just above from this checkout (with deps, pip would look for a b2batch on the package index), and typer and
# click (the b2luigi command), in the test extras. The b2luigi shim holds the b2luigi layer's code (b2luigi's API
# on b2batch's public API): editable, as b2batch is, so that the tests run this checkout's code, not a copy made
# at the last install (test_b2luigi_last_mile.py installs it non-editable into a fresh venv).
python3 -m pip install --quiet --disable-pip-version-check --no-deps -e ./compat/b2luigi-shim
python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    ./compat/joblib-htcondor-shim ./compat/pypoolparty-shim
# The real b2luigi, joblib-htcondor, pypoolparty and PyTaskFarmer, each in its own venv (differential tests).
bash tests/peers/install.sh
export B2BATCH_REQUIRE_PEERS=1
if [[ $(id -u) -eq 0 && -z ${B2BATCH_NO_CLUSTERS:-} ]]; then
    bash tests/clusters/slurm.sh start
    bash tests/clusters/sge.sh start
    bash tests/clusters/htcondor.sh start  # a real personal HTCondor (skipped, with a note, without the archive)
    bash tests/clusters/xrootd.sh start
    bash tests/clusters/podman.sh start || echo "run-all.sh: podman cannot run here: its container tests are skipped" >&2
    # tmux drives the live table in a real terminal (tests/display/test_progress.py); not on a new machine
    if ! command -v tmux > /dev/null; then
        apt-get -q -o DPkg::Lock::Timeout=900 update > /dev/null
        apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 tmux > /dev/null
    fi
    # Debian's chromium renders the HTML run report headless (tests/display/test_html_report.py)
    if ! command -v chromium > /dev/null; then
        apt-get -q -o DPkg::Lock::Timeout=900 update > /dev/null
        apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 chromium > /dev/null
    fi
    export B2BATCH_REQUIRE_BROWSER=1
else
    echo "run-all.sh: not root (or B2BATCH_NO_CLUSTERS set): Slurm, SGE and XRootD tests are skipped" >&2
fi
# Most slow tests wait on schedulers: they run side by side on B2BATCH_TEST_WORKERS pytest-xdist workers (3 by
# default; 0 runs them one after another in this process). Tests that share a cluster, or measure time, run one
# after another in their xdist_group (tests/helpers/tiers.py); the clusters above are started once, here, not per
# worker. On this 2-core machine the whole suite took 18:07 with 3 workers (2026-12-07; 43 min without, earlier).
# b2batch's modules compiled once, as a pip install of a wheel does: with PYTHONDONTWRITEBYTECODE set (as on the
# project's machines) every workflow and job process of the suite would compile the ones it imports again.
python3 -m compileall -q -j 0 b2batch compat > /dev/null ||
    echo "run-all.sh: b2batch's modules could not be compiled ahead (a read-only checkout?): each process compiles them" >&2
workers=${B2BATCH_TEST_WORKERS:-3}
parallel=()
if [[ $workers != 0 ]]; then
    parallel=(-n "$workers" --dist loadgroup)
fi
exec python3 -m pytest -p no:cacheprovider --durations=25 "${parallel[@]}" "$@"
