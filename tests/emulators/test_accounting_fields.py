"""The accounting the emulators answer: condor_history's usage attributes and bjobs' CPU_USED/MAX_MEM/MEMLIMIT,
in the real tools' formats, with what the job used (the runner's getrusage of its one child), read back by
b2batch's own parsers (b2batch/systems/accounting.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from b2batch.systems.accounting import (BJOBS_FIELDS, HISTORY_ATTRIBUTES, parse_bjobs_usage,
                                        parse_condor_history)
from tests.emulators.conftest import Emu, wait_for

#: Holds about 150 MB resident for a moment, then spends about 0.3 s of CPU.
HOLD = """import time
b = bytearray(150 * 1024 * 1024)
for k in range(0, len(b), 4096):
    b[k] = 1
time.sleep(0.5)
t = time.process_time() + 0.3
while time.process_time() < t:
    pass
"""


def test_condor_history_has_the_usage_attributes(emu: Emu) -> None:
    Path("hold.py").write_text(HOLD)
    cluster = emu.submit(f"executable = {sys.executable}\narguments = {Path('hold.py').resolve()}\n"
                         "request_memory = 400\nrequest_cpus = 2\nqueue\n")
    wait_for(lambda: emu.condor_q(history=True), timeout=60)
    out = emu.call("condor_history", "-json", "-attributes", HISTORY_ATTRIBUTES, f"{cluster}.0")
    ad = emu.condor_q(history=True)[0]
    assert isinstance(ad["RemoteUserCpu"], float) and isinstance(ad["ResidentSetSize"], int)
    assert ad["MemoryUsage"] == (ad["ResidentSetSize"] + 1023) // 1024  # MB, as HTCondor's expression says
    assert ad["LastRemoteHost"].startswith("slot1@")
    usage = parse_condor_history(out.out)[f"{cluster}.0"]
    assert 150 * 2**20 < usage.max_rss < 250 * 2**20, usage
    assert usage.cpu is not None and usage.cpu >= 0.3 and usage.wall is not None and usage.wall >= 0.5
    assert (usage.req_mem, usage.req_cpus, usage.exit_code) == (400 * 2**20, 2, 0)
    assert usage.source == "condor_history" and usage.host


def test_bjobs_prints_cpu_used_max_mem_and_memlimit(emu: Emu) -> None:
    Path("hold.py").write_text(HOLD)
    job = emu.bsub("-M", "2000", "-n", "1", f"{sys.executable} {Path('hold.py').resolve()}")
    wait_for(lambda: emu.bjobs("-a", "-o", "stat")["RECORDS"][0]["STAT"] in ("DONE", "EXIT"), timeout=60)
    record = emu.bjobs("-a", "-o", BJOBS_FIELDS, str(job))["RECORDS"][0]
    assert re.fullmatch(r"\d+\.\d second\(s\)", record["CPU_USED"]), record
    assert re.fullmatch(r"\d+ Mbytes", record["MAX_MEM"]), record
    assert record["MEMLIMIT"] == "2000 M"
    usage = parse_bjobs_usage(emu.call("bjobs", "-json", "-a", "-o", BJOBS_FIELDS, str(job)).out)[str(job)]
    assert 150 * 2**20 < usage.max_rss < 250 * 2**20, usage
    assert usage.cpu is not None and usage.cpu >= 0.3 and usage.req_mem == 2000 * 2**20
    assert (usage.state, usage.exit_code, usage.source) == ("DONE", 0, "bjobs") and usage.host
