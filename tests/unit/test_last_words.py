"""A worker that died without an answer: its cell's reason quotes the last line it wrote (its own
one-line error, a traceback's exception), where it named only the exit code and the phase, the
reason itself in the worker's log alone. Nothing is made up, and the log's text cannot act."""

from __future__ import annotations

import signal
from pathlib import Path

from harness.bundle.migrations import SCHEMA_VERSION
from harness.run.isolation import WorkerOutcome, stopped_in
from harness.run.last_words import MAX_SAID_CHARS, said_last, whole_log, with_said_last

LOG = "cells/0123456789abcdef/worker.log"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}"

#: What a worker wrote that could not read its request: a plugin model it cannot find.
REFUSED_REQUEST = ("<frozen runpy>:128: RuntimeWarning: 'harness.measure.worker' found in sys.modules\n"
                   "fusionbench worker: cannot read the request: unknown model 'acme_block'\n")
#: An exception that escaped the worker's `main`, under the parent's note that its preloaded parent failed.
TRACEBACK = ("fusionbench: this worker started as a fresh Python: its preloaded parent did not start: OSError\n"
             "Traceback (most recent call last):\n"
             '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
             '  File "/h/harness/measure/worker.py", line 181, in bind_to_slot\n'
             '    os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})\n'
             "    ^^^^^^^^^^^^^^^^^^^^\n"
             "OSError: [Errno 22] Invalid argument\n\n")
#: A plugin backend's module that fails to import, as Python reports it.
PLUGIN_IMPORT = ("Traceback (most recent call last):\n"
                 '  File "/site/acme_backend/__init__.py", line 3, in <module>\n'
                 "    import acme_runtime\n"
                 "ModuleNotFoundError: No module named 'acme_runtime'\n")
#: A native library's crash: faulthandler's dump, then a parent's note on the answer it refused.
FAULTHANDLER = ("Fatal Python error: Segmentation fault\n\n"
                "Current thread 0x00007f (most recent call first):\n"
                '  File "/site/acme_backend/run.py", line 9 in __call__\n\n'
                "Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n"
                "\nfusionbench: what the worker kept of its answer is unreadable: not a regular file\n")


def test_the_last_line_a_worker_wrote_is_its_own_error_or_its_exception() -> None:
    assert said_last(REFUSED_REQUEST) == "fusionbench worker: cannot read the request: unknown model 'acme_block'"
    assert said_last(TRACEBACK) == "OSError: [Errno 22] Invalid argument"
    assert said_last(PLUGIN_IMPORT) == "ModuleNotFoundError: No module named 'acme_runtime'"
    assert said_last(FAULTHANDLER) == "Fatal Python error: Segmentation fault"


def test_an_exception_over_several_lines_is_quoted_whole_from_its_first() -> None:
    """An exception with a note (`add_note`) or a message over several lines: Python writes the lines
    after the exception's, unindented, and the reason quoted the last (`while building the cell
    acme`), not the error. A line of the worker's own after a blank one is still its last word."""
    noted = PLUGIN_IMPORT.replace("ModuleNotFoundError: No module named 'acme_runtime'\n",
                                  "RuntimeError: could not compile the model\nwhile building the cell acme\n")
    assert said_last(noted) == "RuntimeError: could not compile the model / while building the cell acme"
    assert said_last(TRACEBACK + "fusionbench worker: the cell ended\n") == "fusionbench worker: the cell ended"
    assert said_last(REFUSED_REQUEST.replace("\nfusion", "\n\nfusion")) == said_last(REFUSED_REQUEST)


def test_a_worker_that_wrote_nothing_of_its_own_keeps_the_reason_it_had() -> None:
    for log_text in ("", "\n\n", "Traceback (most recent call last):\n  File \"x.py\", line 1\n",
                     "fusionbench: this worker started as a fresh Python: its preloaded parent did not start\n"):
        assert said_last(log_text) is None, log_text
        assert with_said_last("worker killed by SIGKILL (in phase timing)", log_text) == \
            "worker killed by SIGKILL (in phase timing)"


def test_a_reason_names_the_exit_code_phase_and_last_line() -> None:
    """(The record's reason then ends naming the whole log: tests/unit/test_kept_answer.py.)"""
    died = WorkerOutcome(None, 2, False, "start", 0.5)
    assert died.failure_reason(60, REFUSED_REQUEST) == (
        "worker exited with code 2 without an answer (in phase start); it last wrote: fusionbench worker: cannot "
        "read the request: unknown model 'acme_block'")
    crashed = WorkerOutcome(None, -signal.SIGSEGV, False, "first_call", 0.5)
    assert crashed.failure_reason(60, FAULTHANDLER) == (
        "worker killed by SIGSEGV (in phase first_call); it last wrote: Fatal Python error: Segmentation fault")
    # the parent's own limits are their reason: the last line before the parent killed it is not
    assert WorkerOutcome(None, -signal.SIGKILL, True, "loadgen", 3.0).failure_reason(3, TRACEBACK) == \
        "time limit of 3 s exceeded (in phase loadgen)"
    over = WorkerOutcome(None, -signal.SIGKILL, False, "memory", 3.0, memory_exceeded_bytes=300 << 20,
                         memory_limit_bytes=256 << 20)
    assert "last wrote" not in over.failure_reason(60, TRACEBACK)


def test_the_log_is_hostile_text_that_neither_acts_nor_moves_the_phase() -> None:
    """A line with a terminal escape, a bidirectional override and the words of another phase: the
    reason shows the codes, keeps the phase the parent read, and quotes at most MAX_SAID_CHARS."""
    hostile = "RuntimeError: \x1b[2J\u202eover (in phase loadgen) " + "x" * 500 + "\n"
    reason = WorkerOutcome(None, 1, False, "prepare", 0.5).failure_reason(60, hostile)
    said = said_last(hostile)
    assert said is not None and len(said) == MAX_SAID_CHARS and said.endswith("...")
    assert said.startswith("RuntimeError: \\x1b[2J\\u202eover (in phase loadgen)")
    assert "\x1b" not in reason and "\u202e" not in reason
    assert stopped_in(reason) == "prepare"


def test_a_failed_cells_line_as_the_run_ends_names_its_log_once(tmp_path: Path) -> None:
    """The run's last lines named a cell's log twice where its reason quoted the worker's last words:
    `... crashes now (whole log: cells/ID/worker.log) (its log: /out/RUN/cells/ID/worker.log)`. The
    line names it once, by the path to open; a reason without the worker's words keeps all of it."""
    from harness.bundle.reader import load
    from harness.run.ending import bad_line

    record = next(r for r in load(GOLDEN).records if r.status == "valid")
    (tmp_path / LOG).parent.mkdir(parents=True)
    (tmp_path / LOG).write_text(FAULTHANDLER)
    died = WorkerOutcome(None, -signal.SIGSEGV, False, "first_call", 0.5).failure_reason(60, FAULTHANDLER) + whole_log(LOG)
    failed = record.model_copy(update={"status": "failed", "reasons": [died], "log": LOG})
    label = record.config.shown_label
    assert bad_line(failed, tmp_path).plain == (
        f"  {label}: failed: worker killed by SIGSEGV (in phase first_call); it last wrote: Fatal Python error: "
        f"Segmentation fault (its log: {tmp_path / LOG})")
    raised = failed.model_copy(update={"reasons": [f"prepare: RuntimeError: the compiler crashed (whole log: {LOG}) again"]})
    assert bad_line(raised, tmp_path).plain == (
        f"  {label}: failed: prepare: RuntimeError: the compiler crashed (whole log: {LOG}) again (its log: {tmp_path / LOG})")
    (tmp_path / LOG).unlink()  # no log in the bundle: none named, the reason as it stands
    assert bad_line(failed, tmp_path).plain == f"  {label}: failed: {died}"
