"""The system under test that LoadGen drives: how its queries become calls of the prepared model.

The model runs inside LoadGen's issue callback, which LoadGen calls on the thread that started
the test: the worker's main thread, the thread the device-timing pass and a bare loop use (an
OpenMP runtime keeps a thread team per calling thread, so a model called from a second thread
would run with a second team beside the first). Each query is answered before the callback
returns, as MLPerf's own null system under test does; nothing is handed between threads.

- SingleStream: the query's one sample is the batch.
- MultiStream: the query's samples are one batch.
- Offline: the one query's samples run `batch` at a time (MLPerf lets an Offline system take
  them in any order; they are taken in the order given). On a GPU, `depth` batches stay in
  flight: the next one is launched while the device runs the one before, and a batch is
  answered when the CUDA event recorded after it completes. On a CPU every call finishes before
  it returns, so the depth is 1.
- Server: LoadGen coalesces the queries whose arrival time passed while the model was busy
  (`server_coalesce_queries`) into one callback, which runs them `batch` at a time: a queue with
  dynamic batching, without a serving thread.

Batches are not copied together. LoadGen loads its performance set in an order (the QSL's load
callback gives it) and draws MultiStream and Offline queries as consecutive runs of that order,
cycled; so the samples are stacked once, in that order and cycled past its end (`SampleRing`),
and a batch is a view of `batch` consecutive rows. A batch whose samples are not such a run (a
Server batch, or a LoadGen that draws otherwise) is gathered into a buffer instead, on a CPU with
numpy (one thread: no torch OpenMP team wakes beside a backend with its own thread pool), on a
GPU with `index_select`. A batch with fewer samples than its size is padded (static shapes): a
view with the next samples of the order, a gathered batch with its own samples again.
Clock reads around the gather, the call and the answer (three per batch; LoadGen times the whole
query either way) say where a query's time went (`SUTTimes`).

In a performance run the responses carry no data. With `answer_top1` (LoadGen's accuracy mode, and
compliance runs that log responses) each response carries the sample's top-1 class as a float32,
as MLPerf's reference image classifiers answer (harness/mlperf/accuracy.py).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from harness.contract import Prepared
from harness.mlperf.accuracy import response_bytes
from harness.scenario.rules import batches_in_flight


@dataclass
class SUTTimes:
    """Per-batch nanoseconds spent gathering inputs, in the model call (until its results were
    ready) and answering LoadGen. With batches in flight (`pipelined`), a call's time runs from
    its launch to its event's completion, so it includes waiting behind the batch before it."""

    pipelined: bool = False
    gather_ns: list[int] = field(default_factory=list)
    call_ns: list[int] = field(default_factory=list)
    respond_ns: list[int] = field(default_factory=list)
    samples: int = 0
    batches: int = 0
    gathered_batches: int = 0  # batches that were copied together rather than viewed


class SampleRing:
    """The loaded samples stacked in LoadGen's load order and cycled, so that every run of up to
    `batch` consecutive samples of that order is a view; anything else is gathered (copied)."""

    def __init__(self, samples: list[Any], batch: int, depth: int) -> None:
        import torch

        self.samples = samples
        self.batch = batch
        self.device = samples[0].device
        self.views: list[Any] = []
        self.ring: list[int] = []
        self.position: dict[int, int] = {}
        self.buffers = [torch.empty((batch, *samples[0].shape[1:]), dtype=samples[0].dtype, device=self.device)
                        for _ in range(depth)] if batch > 1 else []
        if self.device.type == "cuda":  # one pinned index buffer per slot: reused once its batch completed
            self._indices = [torch.empty(batch, dtype=torch.int64, pin_memory=True) for _ in range(depth)]

    def load(self, indices: list[int]) -> None:
        """LoadGen's QSL load callback: stack these samples in this order, cycled."""
        import torch

        order = list(dict.fromkeys(indices))  # a MultiStream load list repeats its start at its end
        if not order or self.batch == 1:
            return
        self.ring = [order[k % len(order)] for k in range(len(order) + self.batch - 1)]
        self.position = {index: k for k, index in enumerate(self.ring[: len(order)])}
        rows = torch.cat([self.samples[index] for index in self.ring])
        self.views = [rows[k:k + self.batch] for k in range(len(order))]

    def batch_of(self, indices: list[int], slot: int) -> tuple[Any, bool]:
        """The input for samples `indices` (at most `batch`; padded), and whether it was copied."""
        start = self.position.get(indices[0])
        if start is not None and self.ring[start:start + len(indices)] == indices:
            return self.views[start], False
        return self._gather(indices, slot), True

    def _gather(self, indices: list[int], slot: int) -> Any:
        import torch

        buffer = self.buffers[slot]
        # A short batch is padded with its own samples again: never with what the buffer held before
        # (uninitialised memory on a slot's first use, whose NaNs and denormals change a model's speed).
        rows_of = [indices[k % len(indices)] for k in range(self.batch)]
        if self.device.type == "cpu":
            import numpy as np

            # Rows as raw bytes: numpy copies any dtype (bf16 included) without torch's thread pool.
            rows = buffer.reshape(self.batch, -1).view(torch.uint8).numpy()
            for row, index in enumerate(rows_of):
                np.copyto(rows[row], self.samples[index].reshape(-1).view(torch.uint8).numpy())
            return buffer
        host = self._indices[slot]
        host[:] = torch.tensor(rows_of, dtype=torch.int64)
        torch.index_select(self._bank(), 0, host.to(self.device, non_blocking=True), out=buffer)
        return buffer

    def _bank(self) -> Any:
        if not hasattr(self, "_stacked"):
            import torch

            self._stacked = torch.cat(self.samples)
        return self._stacked


class InlineSUT:
    """Answers LoadGen's queries inside its issue callback (see the module docstring)."""

    def __init__(self, lg: Any, prepared: Prepared, samples: list[Any], batch: int, scenario: str,
                 answer_top1: bool = False) -> None:
        self.lg = lg
        self.answer_top1 = answer_top1
        self.prepared = prepared
        self.samples = samples
        self.batch = batch
        self.depth = batches_in_flight(scenario, samples[0].device.type == "cuda", batch)
        self.ring = SampleRing(samples, batch, self.depth)
        self.times = SUTTimes(pipelined=self.depth > 1)
        self.error: BaseException | None = None
        self._answered = 0  # queries of the current callback answered so far (a prefix: in order)

    def load_samples(self, indices: list[int]) -> None:
        self.ring.load(list(indices))

    def issue_queries(self, queries: list[Any]) -> None:
        if self.error is not None:  # the model failed earlier: answer at once, so LoadGen ends
            self._respond(queries)
            return
        self._answered = 0
        try:
            if self.batch == 1:
                for query in queries:
                    self._run_one(query)
            elif self.depth > 1:
                self._run_pipelined(queries)
            else:
                for start in range(0, len(queries), self.batch):
                    self._run_batch(queries[start:start + self.batch])
        except BaseException as exc:  # re-raised by the LoadGen pass once LoadGen has returned
            self.error = exc
            self._respond(queries[self._answered:])  # batches still in flight included

    def flush_queries(self) -> None:
        pass

    def _top1(self, output: Any) -> Any:
        """The classes of a batch's output, taken at once (in stream order on a GPU, before a later
        batch may reuse the output's memory); None in a performance run."""
        return output.reshape(output.shape[0], -1).argmax(1) if self.answer_top1 else None

    def _respond(self, queries: list[Any], top1: Any = None) -> None:
        if top1 is None:
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, 0, 0) for q in queries])
            return
        classes = top1[: len(queries)].tolist()
        buffers = [array("B", response_bytes(int(c))) for c in classes]  # alive until LoadGen has copied them
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, b.buffer_info()[0], len(b))
                                      for q, b in zip(queries, buffers)])

    def _run_one(self, query: Any) -> None:
        t0 = perf_counter_ns()
        output = self.prepared(self.samples[query.index])
        self.prepared.synchronize()
        t1 = perf_counter_ns()
        self._respond([query], self._top1(output))
        t2 = perf_counter_ns()
        self._record(0, t1 - t0, t2 - t1, 1, copied=False)

    def _run_batch(self, queries: list[Any]) -> None:
        t0 = perf_counter_ns()
        x, copied = self.ring.batch_of([q.index for q in queries], 0)
        t1 = perf_counter_ns()
        output = self.prepared(x)
        self.prepared.synchronize()
        t2 = perf_counter_ns()
        self._respond(queries, self._top1(output))
        t3 = perf_counter_ns()
        self._record(t1 - t0, t2 - t1, t3 - t2, len(queries), copied)

    def _run_pipelined(self, queries: list[Any]) -> None:
        """Offline on a GPU: keep `depth` batches in flight, answer each when its event completes."""
        import torch

        in_flight: deque[tuple[Any, list[Any], int, int, bool, Any]] = deque()
        for k, start in enumerate(range(0, len(queries), self.batch)):
            chunk = queries[start:start + self.batch]
            if len(in_flight) == self.depth:  # the slot this batch may reuse must be free
                self._finish(*in_flight.popleft())
            t0 = perf_counter_ns()
            x, copied = self.ring.batch_of([q.index for q in chunk], k % self.depth)
            t1 = perf_counter_ns()
            output = self.prepared(x)
            done = torch.cuda.Event()
            done.record()
            in_flight.append((done, chunk, t1 - t0, t1, copied, self._top1(output)))
        while in_flight:
            self._finish(*in_flight.popleft())

    def _finish(self, done: Any, chunk: list[Any], gather_ns: int, launched: int, copied: bool, top1: Any) -> None:
        done.synchronize()
        t0 = perf_counter_ns()
        self._respond(chunk, top1)
        t1 = perf_counter_ns()
        self._record(gather_ns, t0 - launched, t1 - t0, len(chunk), copied)

    def _record(self, gather_ns: int, call_ns: int, respond_ns: int, samples: int, copied: bool) -> None:
        times = self.times
        times.gather_ns.append(gather_ns)
        times.call_ns.append(call_ns)
        times.respond_ns.append(respond_ns)
        times.samples += samples
        times.batches += 1
        times.gathered_batches += copied
        self._answered += samples
