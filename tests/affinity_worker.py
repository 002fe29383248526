"""A worker (`run_worker(module=...)`) that answers at once with the CPUs harness.measure.worker
records as given (`given_cpus`), read where run_cell reads them: before its own import of torch
(a worker forked from a preloaded parent has torch imported already)."""

import sys
from pathlib import Path

from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.measure.worker import given_cpus

given = given_cpus()
import torch  # noqa: E402, F401  (as run_cell imports it next: libgomp binds the main thread under OMP_PROC_BIND)

request = WorkerRequest.from_json(Path(sys.argv[1]).read_text())
Path(request.phase_file).write_text("prepare")
Path(request.answer_file).write_text(WorkerAnswer(status="valid", environment={"cpu_affinity": given}).to_json())
