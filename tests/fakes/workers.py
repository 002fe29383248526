"""Fake worker processes for the isolation tests: `python -m tests.fakes.workers BEHAVIOUR REQUEST`.

Each misbehaves the way a real backend can: a crash, a hang, an exit without an answer, a
child process that hoards memory.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
    behaviour = request["behaviour"]
    Path(request["phase_file"]).write_text("prepare")
    print("fake worker starting", behaviour, flush=True)
    if behaviour == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif behaviour == "hang":
        child = os.fork()  # a grandchild must die with it too
        if child == 0:
            time.sleep(600)
        time.sleep(600)
    elif behaviour == "exit":
        print("giving up", file=sys.stderr, flush=True)
        sys.exit(3)
    elif behaviour == "hog":  # memory held by a child, which the limit must count too
        if os.fork() == 0:
            hoard = [b"\x01" * (16 << 20) for _ in range(64)]  # 1 GiB, written so it is resident
            time.sleep(600 + len(hoard))
        time.sleep(600)
    elif behaviour == "answer":
        Path(request["answer_file"]).write_text(json.dumps({"status": "valid", "reasons": [], "metrics": {"x": 1}}))


if __name__ == "__main__":
    main()
