#!/usr/bin/env bash
# Installs the real tools b2batch's drop-ins are compared with, each from PyPI into a venv of its own, for the
# differential tests and bench/: b2luigi 1.3.0, joblib-htcondor, pypoolparty, PyTaskFarmer.
#
#   tests/peers/install.sh          # idempotent: a venv whose stamp matches is left as it is (~0.1 s)
#   tests/peers/install.sh --print  # the folder that holds the venvs
#
# The venvs live in $B2BATCH_PEERS (default ~/.cache/b2batch-peers/<python version>): <name>/bin/python.
# tests/peers.py finds them; the test command sets B2BATCH_REQUIRE_PEERS=1 so that a missing one fails.
set -euo pipefail
py=${PYTHON:-python3}
root=${B2BATCH_PEERS:-${HOME:-/root}/.cache/b2batch-peers/$("$py" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')}
if [[ ${1:-} == --print ]]; then echo "$root"; exit 0; fi
mkdir -p "$root"

# name -> pip requirements (pinned: a differential test compares with one release)
declare -A peers=(
    [b2luigi]="b2luigi==1.3.0"
    [joblib-htcondor]="joblib-htcondor==0.2.3"
    [pypoolparty]="pypoolparty==0.3.1"
    [pytaskfarmer]="pytaskfarmer==0.1.0"
)
for name in "${!peers[@]}"; do
    venv=$root/$name
    want=${peers[$name]}
    if [[ -x $venv/bin/python && $(cat "$venv/.b2batch-stamp" 2>/dev/null) == "$want" ]]; then
        continue
    fi
    echo "peers: installing $want into $venv" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want \
        2> >(grep -v "^WARNING: Location .* is ignored" >&2)
    echo "$want" > "$venv/.b2batch-stamp"
done
