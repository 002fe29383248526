"""`fusionbench rerun BUNDLE`: what it reads of the bundle (harness/run/rerun.py), what it is refused
for, each in one line before a cell runs, and what it passes on that a scenario file cannot say:
the values of the variables `env:` passes on, and the package of a plugin not installed here."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.bundle import manifest
from harness.bundle.header_record import BackendReport
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.reader import load
from harness.cli.main import main
from harness.cpu_topology import physical_cores
from harness.errors import ConfigError, SchemaVersionError
from harness.run import executors, plan, rerun
from harness.run.probe_answer import ProbeAnswer
from harness.run.rerun_original import _check_cells_made_again, _variables_seen, read
from harness.scenario.cells import expand

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}"


def test_a_rerun_runs_the_stored_scenario_as_stored_and_records_the_bundle_it_reruns() -> None:
    original = read(GOLDEN, {"backend": {"null"}})
    header = json.loads((GOLDEN / "bundle.json").read_text())
    assert original.stored == header["scenario"]  # stored as it is: the rerun's digest is the original's
    assert original.device == header["device"] and original.only == {"backend": {"null"}}
    assert original.rerun_of == {"run_id": header["run_id"], "created": header["created"],
                               "scenario_sha256": header["scenario_sha256"],
                               "manifest_sha256": manifest.sha256_file(GOLDEN / "MANIFEST.sha256")}
    assert original.without_cache is False and original.jobs == 1


def test_a_rerun_of_cells_the_bundle_never_planned_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"--only backend=torchscript matches no cell"):
        read(GOLDEN, {"backend": {"torchscript"}})


def test_a_bundle_whose_cells_this_harness_would_not_make_again_is_refused() -> None:
    """Golden v7's cell ids hashed their rounds in, as schema 7 did: its rerun's cells have other ids
    and are its cells still, which `compare` pairs (by its config's hash without the rounds). A
    stored scenario that makes other cells than the bundle planned is refused: the rerun would
    measure other cells than it ran."""
    assert len(read(REPO / "tests" / "golden" / "v7", None).only) == 0
    loaded = load(GOLDEN)
    other = {**loaded.header["scenario"], "inputs": {**loaded.header["scenario"]["inputs"], "seed": 1}}
    with pytest.raises(ConfigError) as refused:
        _check_cells_made_again(GOLDEN, loaded, other, "cpu", {})
    assert f"cannot rerun {GOLDEN}: 14 of the 14 cell(s) it planned (the first resnet18 eager fusion-on SingleStream " \
           "cpu fp32 b1) are not cells this harness makes of the scenario it stores" in str(refused.value)


def test_a_bundle_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "newer"
    shutil.copytree(GOLDEN, root)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "schema_version": SCHEMA_VERSION + 1}))
    manifest.write(root)
    with pytest.raises(SchemaVersionError, match=str(root)):
        read(root, None)


def test_the_values_env_passed_on_are_the_ones_the_cells_saw_and_set_only_while_the_rerun_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored scenario keeps `env: [OMP_NUM_THREADS]`, the name: run as a file from a shell without
    it, the cells ran on every core where the bundle's ran on one, and `compare` unpaired them all."""
    loaded = load(GOLDEN)
    saw = [record.model_copy(update={"environment": {**record.environment, "variables": {
        **record.environment.get("variables", {}), "OMP_NUM_THREADS": "1", "TVM_NUM_THREADS": str(1 + index % 2)}}})
        for index, record in enumerate(loaded.records)]
    loaded.__dict__["records"] = saw  # the cached property's value: these cells saw OMP_NUM_THREADS=1
    stored = {**loaded.header["scenario"], "env": ["OMP_NUM_THREADS", "KMP_AFFINITY", "TVM_NUM_THREADS", "MKL_VERBOSE=0"]}
    variables, apart = _variables_seen(loaded, stored)
    assert variables == {"OMP_NUM_THREADS": "1", "KMP_AFFINITY": None}  # none of its cells saw KMP_AFFINITY
    assert apart == {"TVM_NUM_THREADS": "1 and 2"}
    original = replace(read(GOLDEN, None), stored=stored, variables=variables, variables_apart=apart)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("KMP_AFFINITY", "compact")
    console = Console(record=True, width=200)
    with rerun.variables_set(original, console):
        assert os.environ.get("OMP_NUM_THREADS") == "1" and "KMP_AFFINITY" not in os.environ
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["KMP_AFFINITY"] == "compact"
    said = console.export_text()
    assert "OMP_NUM_THREADS=1 for the rerun's cells, as the bundle's saw it (this shell: unset)" in said
    assert "KMP_AFFINITY=unset for the rerun's cells, as the bundle's saw it (this shell: compact)" in said
    assert ("env: TVM_NUM_THREADS: the bundle's cells saw it at several values (1 and 2); its rerun passes on this "
            "shell's") in said


def test_a_plugin_the_bundle_ran_and_no_package_here_registers_is_named_with_its_package() -> None:
    """A file run of a stored scenario whose backend is a plugin not installed here says only
    `unknown backend`; the bundle records the package and version it came from."""
    original = read(GOLDEN, None)
    stored = json.loads(json.dumps(original.stored).replace('"name": "null"', '"name": "missingplugin"'))
    header = {**original.header,
              "backends": {**original.header["backends"], "missingplugin": {
                  "available": True, "versions": {"fusionbench-missingplugin": "0.3.0"}}},
              "system": {**original.header["system"], "packages": {"fusionbench-missingplugin": "0.3.0"}}}
    original = replace(original, header=header, stored=stored)
    cells = expand(stored, "cpu")
    with pytest.raises(ConfigError) as refused:
        rerun.plugin_gone(original, cells)
    said = str(refused.value)
    assert said.startswith(f"cannot rerun {GOLDEN}: 2 cell(s) to run are of backend 'missingplugin', which the run had")
    assert said.endswith("the run that made this bundle had it from fusionbench-missingplugin 0.3.0: pip install "
                         "fusionbench-missingplugin==0.3.0")
    rerun.plugin_gone(original, [cell for cell in cells if cell.config.backend != "missingplugin"])  # --only


def test_a_dry_rerun_lists_the_bundles_cells_and_a_cuda_bundle_on_a_machine_without_one_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    backends = {"eager": BackendReport(available=True), "null": BackendReport(available=True)}
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(device="cpu", backends=backends))
    assert main(["rerun", str(GOLDEN), "--only", "backend=null", "--dry-run", "--out", str(tmp_path / "out")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "2 of 2 cell(s) would run" in out and not (tmp_path / "out").exists()
    header = json.loads((GOLDEN / "bundle.json").read_text())
    assert out.startswith(f"fusionbench: a rerun of {GOLDEN} (run {header['run_id']} of {header['created']}) on cpu, "
                          "from the scenario it stores"), out  # its lines named neither the bundle nor its run
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(device="cuda", backends=backends))
    assert main(["rerun", str(GOLDEN), "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (f"fusionbench: error: cannot rerun {GOLDEN}: its cells ran on cuda and "
                                               "torch sees no CUDA device on this machine; rerun it on a machine with a GPU")


def test_a_default_cache_folder_that_cannot_be_made_is_named_so_and_the_rerun_takes_the_ways_on(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Under a read-only HOME a rerun was refused as "--cache-dir .../fusionbench: cannot create it
    (...); give --cache-dir a folder of your own, or --no-cache", naming an option the user never
    gave, and neither option was one rerun took: no rerun could run there. A file stands in for the
    read-only HOME (the suite runs as root)."""
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(device="cpu", backends={
        "null": BackendReport(available=True)}))
    given = ["rerun", str(GOLDEN), "--only", "backend=null", "--dry-run", "--out", str(tmp_path / "out")]
    assert main(given) == 2
    assert capsys.readouterr().err == (
        f"fusionbench: error: the default --cache-dir {tmp_path / 'a-file' / 'fusionbench'}: cannot create it (Not a "
        "directory); give --cache-dir a folder of your own, or --no-cache to run without the cache\n")
    assert main([*given, "--no-cache"]) == 0
    assert main([*given, "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "2 of 2 cell(s) would run" in " ".join(capsys.readouterr().out.split())
    assert main([*given, "--cache-dir", str(tmp_path / "a-file" / "x")]) == 2
    assert capsys.readouterr().err.startswith(f"fusionbench: error: --cache-dir {tmp_path / 'a-file' / 'x'}: cannot create")


def test_a_bundle_run_in_more_slots_than_this_machine_has_cores_is_refused_naming_the_bundle(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A rerun keeps its bundle's `--jobs`; on a machine with fewer cores it was refused as "--jobs 4:
    each cell needs a core of its own and 2 are usable here", an option rerun was never given and
    does not take."""
    root = tmp_path / "slots"
    shutil.copytree(GOLDEN, root)
    jobs = (os.cpu_count() or 1) + 1
    header = json.loads((root / "bundle.json").read_text())
    header.update(rounds_paired=None, executor={"name": "local", "worker_start": "preloaded", "jobs": jobs, "slots": [
        {"index": index, "cpus": [index], "gpu": None} for index in range(jobs)]})
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: pytest.fail("the backends were asked"))
    assert main(["rerun", str(root), "--only", "backend=null", "--dry-run"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"fusionbench: error: cannot rerun {root}, whose run ran its cells {jobs} at once, as its "
                           f"rerun does: --jobs {jobs}: each cell needs a core of its own and "), said
    assert said.endswith(f"; rerun it on a machine with {jobs} cores or more\n")


def test_a_bundle_whose_env_asks_more_threads_than_a_slot_here_has_is_refused_naming_the_bundle(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A bundle run with `--jobs 2` on 8 cores and `env: [OMP_NUM_THREADS=4]`, rerun on 2 cores: the
    probe ran, then `--jobs 2: the scenario's env sets OMP_NUM_THREADS=4, more threads than a slot's
    1 core(s) runs; give at most 1 (fewer are kept), or give each cell more cores`, an option the
    rerun was never given and a file it cannot change. Refused before the probe, naming the bundle."""
    from harness.run import rerun_original, slots
    from harness.scenario.loading import sha256

    root = _run_in_slots(tmp_path / "pinned", 8)
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["env"] = ["OMP_NUM_THREADS=1000"]  # more than any slot here
    header["scenario_sha256"] = sha256(header["scenario"])
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: pytest.fail("the backends were asked"))
    # two cores of a core each, no quota: the suite's workers each have a share of this machine's cores
    from harness import cgroup_limits
    monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1])
    monkeypatch.setattr(slots, "physical_cores", lambda cpus, siblings_of=None: [(cpu,) for cpu in sorted(cpus)])
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: None)
    cores = 1
    cut = rerun_original.slots_here(2)
    assert isinstance(cut, list) and [len(slot.cpus) for slot in cut] == [cores, cores], cut
    assert main(["rerun", str(root), "--only", "backend=null", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"fusionbench: error: cannot rerun {root}, whose run ran its cells 2 at once with env: OMP_NUM_THREADS=1000, as "
        f"its rerun does: a slot of --jobs 2 here has {cores} core(s), fewer than those threads; rerun it on a machine "
        "whose --jobs 2 slots have 1000 cores or more\n")
    assert slots.counts_over(4, ["OMP_NUM_THREADS=4", "MKL_NUM_THREADS"], {"MKL_NUM_THREADS": "6"}) == [
        ("MKL_NUM_THREADS", 6)]


def test_a_bundle_that_names_its_input_folder_without_the_images_digest_is_said_to_be_unchecked() -> None:
    """A resume of such a bundle (a harness before bundle.json kept `inputs_sha256`) is refused; its
    rerun, a new bundle, went on without a word that the images it reads may not be the ones measured."""
    # the hardware, torch's threads and the share: below (this machine's own, which a CI machine's may not be)
    original = replace(read(GOLDEN, {"backend": {"null"}}), hardware_apart=None, threads_apart=None, share_apart=None)
    assert [line.plain for line in rerun.said(original)][1:] == []
    header = {**original.header, "input_folder": "/data/images", "inputs_sha256": None}
    assert [line.plain for line in rerun.said(replace(original, header=header))][1:] == [
        f"fusionbench: warning: {GOLDEN} names its input folder /data/images but records no digest of the images its "
        "cells read: the rerun cannot tell that they are the same images"]
    assert len(rerun.said(replace(original, header={**header, "inputs_sha256": "0" * 64}))) == 1


def test_a_bundle_whose_cells_ran_on_other_hardware_is_said_so_as_its_rerun_begins(tmp_path: Path) -> None:
    """A lab rerunning a bundle on other hardware learned only from `compare`, once the rerun had run,
    that none of its cells would be judged against the original's."""
    copy = tmp_path / "elsewhere"
    shutil.copytree(GOLDEN, copy)
    for path in (copy / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        if isinstance((cell.get("node") or {}).get("cpu"), dict):
            cell["node"]["cpu"].update(model="Intel Xeon", identity="vendor_id GenuineIntel, cpu family 6, model 143")
        path.write_text(json.dumps(cell))
    manifest.write(copy)
    # torch's threads and the share of the machine: the tests below
    original = replace(read(copy, {"backend": {"null"}}), threads_apart=None, share_apart=None)
    assert original.hardware_apart is not None
    there, here = original.hardware_apart
    assert there.startswith(("Intel Xeon x", "a CPU of vendor_id GenuineIntel")) and "Intel Xeon" not in here
    assert [line.plain for line in rerun.said(original)][1:] == [
        f"fusionbench: warning: {copy}'s cells ran on {there}, this machine is {here}: `fusionbench compare` will set the "
        "rerun's cells beside them, judging none, and say whether each fusion verdict held"]
    same = read(copy, {"backend": {"null"}})
    for path in (copy / "cells").glob("*.json"):  # this machine's own words: nothing said
        cell = json.loads(path.read_text())
        if isinstance((cell.get("node") or {}).get("cpu"), dict):
            cell["node"] = {**cell["node"], **executors.node_info(None)}
        path.write_text(json.dumps(cell))
    manifest.write(copy)
    assert read(copy, {"backend": {"null"}}).hardware_apart is None and same.hardware_apart is not None


def test_a_bundle_whose_cells_ran_torchs_default_threads_of_another_core_count_is_said_so_as_its_rerun_begins(
        tmp_path: Path) -> None:
    """A lab whose machine has another core count reran a bundle whose scenario pinned no threads:
    torch ran its own default there and here, so compare set no fusion verdict side by side (`not
    comparable`: torch threads A 8, B 2), which the lab learned once its rerun had run. The rerun now
    says so before it runs, naming both counts and how to pin them; a cell whose worker saw
    OMP_NUM_THREADS (an `env:` or a `--jobs` slot) ran the same count again and is not named."""
    from harness.run.rerun_original import default_threads_here, threads_apart

    assert default_threads_here() >= 1
    loaded = load(GOLDEN)  # its cells ran torch's default, 2 threads, no OMP_NUM_THREADS
    assert threads_apart(loaded, 2) is None and threads_apart(loaded, 8) == (2, 8)
    pinned = json.loads(json.dumps(loaded.cells))
    for cell in pinned:
        cell.get("environment", {}).get("variables", {})["OMP_NUM_THREADS"] = "2"
    assert threads_apart(replace(loaded, cells=pinned), 8) is None
    original = replace(read(GOLDEN, {"backend": {"null"}}), hardware_apart=("AMD EPYC x8, no GPU", "AMD EPYC x2, no GPU"),
                       threads_apart=(8, 2))
    assert [line.plain for line in rerun.said(original)][1:] == [
        f"fusionbench: warning: {GOLDEN}'s cells ran on AMD EPYC x8, no GPU, this machine is AMD EPYC x2, no GPU: "
        "`fusionbench compare` will set the rerun's cells beside them, judging none",  # no fusion verdict held: below
        f"fusionbench: warning: {GOLDEN}'s cells ran torch's default 8 thread(s), its scenario's env: pinning none (no "
        "OMP_NUM_THREADS); here torch's default is 2 (a thread per physical core usable here): `fusionbench compare` "
        "will judge no fusion verdict across the two (`not comparable`: other torch threads); the rerun runs the "
        "scenario as stored, so only a machine of 8 physical core(s), run whole, runs its threads; to compare on any "
        "machine, pin them (env: [OMP_NUM_THREADS=8, MKL_NUM_THREADS=8]) and run the scenario afresh on both"]


def test_torchs_default_here_is_a_thread_per_physical_core_this_process_may_use_whatever_its_quota(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The count a rerun sets against a bundle's unpinned cells, on machines this one is not: bound to
    fewer CPUs than it has (taskset, a cpuset), with SMT siblings (a core's two CPUs are one thread,
    both in the mask or one), and under a cgroup's CPU quota, which torch does not read (a thread per
    core of the mask, throttled), where a `--jobs` slot's threads are cut by it."""
    from harness import cgroup_limits
    from harness.run import slots
    from harness.run.rerun_original import default_threads_here, slot_threads_here, slots_here

    alone = lambda cpu: {cpu}  # noqa: E731
    smt = lambda cpu: {cpu % 8, cpu % 8 + 8}  # noqa: E731 -- 8 cores, CPU k and k+8 one core's two threads
    assert default_threads_here(list(range(8)), alone) == 8
    assert default_threads_here([0, 1], alone) == 2  # taskset -c 0,1 on 8 cores
    assert default_threads_here(list(range(16)), smt) == 8
    assert default_threads_here(list(range(8)), smt) == 8  # one thread of each core
    assert default_threads_here([0, 8], smt) == 1  # both threads of one core
    assert default_threads_here([0, 1, 8], smt) == 2
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: 2.0)
    monkeypatch.setattr(slots, "usable_cores", lambda: list(range(8)))
    assert default_threads_here(None, alone) == 8 and slot_threads_here(slots_here(2, alone), [], {}) == 1
    assert default_threads_here() == len(physical_cores(slots.usable_cores()))


def _run_in_slots(root: Path, cores: int) -> Path:
    """A copy of golden v12 as if run with `--jobs 2` on a machine of `cores` CPUs: each cell in a
    slot of half of them, on as many torch threads as its slot set (OMP_NUM_THREADS, MKL_NUM_THREADS)."""
    shutil.copytree(GOLDEN, root)
    half = cores // 2
    cut = [{"index": k, "cpus": list(range(k * half, (k + 1) * half)), "gpu": None, "gpu_order": None,
            "threads": None} for k in (0, 1)]
    header = json.loads((root / "bundle.json").read_text())
    header.update(rounds_paired=None, executor={"name": "local", "worker_start": "preloaded", "jobs": 2, "slots": cut})
    (root / "bundle.json").write_text(json.dumps(header))
    for number, path in enumerate(sorted((root / "cells").glob("*.json"))):
        cell = json.loads(path.read_text())
        if isinstance((cell.get("node") or {}).get("cpu"), dict):
            cell["node"]["cpu"]["logical_cores"] = cores
            cell["node"]["slot"] = cut[number % 2]
        environment = cell.get("environment") or {}
        if isinstance(environment.get("torch_threads"), int):
            environment.update(torch_threads=half, cpu_affinity=cut[number % 2]["cpus"])
            environment["variables"].update(OMP_NUM_THREADS=str(half), MKL_NUM_THREADS=str(half))
        path.write_text(json.dumps(cell))
    manifest.write(root)
    return root


def test_a_bundle_run_in_jobs_slots_of_another_size_is_said_to_run_other_threads_as_its_rerun_begins(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bundle run with `--jobs 2` on 8 cores ran each cell on 4 torch threads, its slot's; its rerun,
    which keeps `--jobs 2`, on a machine of 2 cores runs 1 a cell, and compare judged no fusion verdict
    (`not comparable`: torch threads A 4, B 1, and other shares), where the rerun said nothing of
    threads and told the lab that compare would say whether each fusion verdict held: its cells'
    OMP_NUM_THREADS, the slot's, read as pinned by the scenario. A slot here is cut as the run cuts
    it: by physical core, under the CPU quota, a thread per CPU or the fewer `env:` asks."""
    from harness import cgroup_limits
    from harness.run import rerun_original, slots
    from harness.run.rerun_original import slot_threads_here, slots_here, threads_apart

    def cores(count: int) -> None:
        monkeypatch.setattr(slots, "usable_cores", lambda: list(range(count)))

    alone, quota = (lambda cpu: {cpu}), [None]
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: quota[0])
    cores(2)
    assert slot_threads_here(slots_here(2, alone), [], {}) == 1 and slot_threads_here(slots_here(1, alone), [], {}) is None
    assert isinstance(slots_here(3, alone), ConfigError)  # not cut here: refused before its probe
    assert slot_threads_here(None, [], {}) is None
    cores(8)
    assert slot_threads_here(slots_here(2, alone), [], {}) == 4
    assert slot_threads_here(slots_here(2, lambda cpu: {cpu % 4, cpu % 4 + 4}), [], {}) == 4  # 2 cores and their siblings a slot
    assert slot_threads_here(slots_here(2, alone), ["OMP_NUM_THREADS", "MKL_NUM_THREADS=2"], {"OMP_NUM_THREADS": "2"}) == 2
    quota[0] = 2.0
    assert slot_threads_here(slots_here(2, alone), [], {}) == 1  # the quota's share

    bundle = _run_in_slots(tmp_path / "eight", 8)
    loaded = load(bundle)
    assert threads_apart(loaded, 2, 1) == (4, 1) and threads_apart(loaded, 2, 4) is None
    assert threads_apart(loaded, 2) is None  # no slots here to judge them by: as before
    # two slots of a core each here, whatever this machine's cores
    monkeypatch.setattr(rerun_original, "slots_here", lambda jobs: [slots.Slot(0, (0,)), slots.Slot(1, (1,))] if jobs == 2 else [])
    original = read(bundle, {"backend": {"null"}})
    assert original.threads_apart == (4, 1)
    assert [line.plain for line in rerun.said(replace(original, hardware_apart=("AMD EPYC x8, no GPU", "x2")))][1:] == [
        f"fusionbench: warning: {bundle}'s cells ran on AMD EPYC x8, no GPU, this machine is x2: `fusionbench compare` "
        "will set the rerun's cells beside them, judging none",  # not that it will say whether each verdict held
        f"fusionbench: warning: {bundle}'s cells ran 4 torch thread(s) each in its run's `--jobs 2` slots, a thread per "
        "CPU of a slot or as its scenario's env: asked; here a slot of `--jobs 2` runs 1: `fusionbench compare` will "
        "judge no fusion verdict across the two (`not comparable`: other torch threads, on other shares of the "
        "machines); the rerun keeps its `--jobs`, so only a machine whose `--jobs 2` slots run 4 thread(s) each runs "
        "its threads"]


def test_a_reruns_slots_here_are_cut_once_as_it_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A rerun of a `--jobs 2` bundle cut this machine's slots three times before its probe (for the
    threads a slot runs, for the share it gets, and to refuse slots too small), each reading the
    affinity, the SMT siblings and the CPU quota again: once now, the three reading that one cut."""
    from harness import cgroup_limits
    from harness.run import slots

    quota_read: list[int] = []
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: quota_read.append(1))
    monkeypatch.setattr(slots, "usable_cores", lambda: list(range(8)))
    monkeypatch.setattr(slots, "physical_cores", lambda cpus, siblings_of=None: [(cpu,) for cpu in sorted(cpus)])
    original = read(_run_in_slots(tmp_path / "eight", 8), {"backend": {"null"}})
    rerun.jobs_fit_here(original)
    assert len(quota_read) == 1
    assert [slot.cpus for slot in original.slots_cut or []] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert original.threads_apart is None  # 4 threads a slot there and here


def test_a_rerun_of_jobs_slots_under_a_cpu_quota_below_them_is_refused_before_its_probe_naming_the_bundle(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A `--jobs 2` bundle rerun on 8 cores under a CPU quota of 1.5 (`docker --cpus 1.5`): the slots
    could not be cut, the check before the probe read the cores alone and let it through, and the
    run's own cut refused it after the probe, telling the lab to give `--jobs` at most 1, an option
    the rerun was never given and cannot take."""
    from harness import cgroup_limits
    from harness.run import slots

    quota_read: list[float] = []
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: quota_read.append(1.5) or 1.5)
    monkeypatch.setattr(slots, "usable_cores", lambda: list(range(8)))
    monkeypatch.setattr(slots, "physical_cores", lambda cpus, siblings_of=None: [(cpu,) for cpu in sorted(cpus)])
    bundle = _run_in_slots(tmp_path / "eight", 8)
    original = read(bundle, {"backend": {"null"}})
    assert original.slots_cut is None
    with pytest.raises(ConfigError) as refused:
        rerun.jobs_fit_here(original)
    assert quota_read == [1.5]  # the cut's own refusal, worded for a rerun: the quota not read and checked again
    assert str(refused.value) == (
        f"cannot rerun {bundle}, whose run ran its cells 2 at once, as its rerun does: this process may use 1.5 CPUs' "
        "worth (its cgroup's CPU quota); rerun it where 2 CPUs' worth or more may be used")
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: 2.0)  # a quota of the slots' size: cut, and run
    rerun.jobs_fit_here(read(bundle, {"backend": {"null"}}))


def test_a_bundle_whose_cells_ran_on_another_share_of_the_machine_is_said_so_as_its_rerun_begins(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bundle run under a CPU quota of 1 (`docker --cpus 1`), its threads the same, rerun on the same
    machine without one: nothing was said, and compare judged none of its cells (`ran on different
    shares of the machine: A the whole machine under a CPU quota of 1, B the whole machine`). The
    share is said as the rerun begins, as `--resume` asks it, and the hardware's line, where there
    is one, no longer says that compare will say whether each fusion verdict held."""
    from harness import cgroup_limits
    from harness.run.rerun_original import share_apart

    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda *args: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(os.cpu_count() or 1)))  # the whole machine
    copy = tmp_path / "quota"
    shutil.copytree(GOLDEN, copy)
    for path in (copy / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        if isinstance((cell.get("environment") or {}).get("torch_threads"), int):
            cell["environment"]["cpu_quota"] = None  # recorded: no quota
        path.write_text(json.dumps(cell))
    manifest.write(copy)
    assert share_apart(load(copy), []) is None
    for path in (copy / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        if "cpu_quota" in (cell.get("environment") or {}):
            cell["environment"]["cpu_quota"] = 1.0
        path.write_text(json.dumps(cell))
    manifest.write(copy)
    assert share_apart(load(copy), []) == ("the whole machine under a CPU quota of 1", "the whole machine")
    assert share_apart(load(GOLDEN), []) is None  # its cells recorded no quota: unknown, not held to
    original = replace(read(copy, {"backend": {"null"}}), threads_apart=None)
    assert original.share_apart == ("the whole machine under a CPU quota of 1", "the whole machine")
    assert [line.plain for line in rerun.said(replace(original, hardware_apart=("Intel Xeon x8, no GPU", "x2")))][1:] == [
        f"fusionbench: warning: {copy}'s cells ran on Intel Xeon x8, no GPU, this machine is x2: `fusionbench compare` "
        "will set the rerun's cells beside them, judging none",
        f"fusionbench: warning: {copy}'s cells ran on the whole machine under a CPU quota of 1, the rerun's cells run on "
        "the whole machine: `fusionbench compare` will judge none of them against the bundle's (`ran on different "
        "shares of the machine`)"]
    # other threads come with their share (a taskset, a slot of another size): their line alone
    assert len(rerun.said(replace(original, hardware_apart=None, threads_apart=(2, 1)))) == 2


def test_images_held_elsewhere_here_are_taken_from_inputs_where_their_digest_is_the_bundles(tmp_path: Path) -> None:
    """A lab holding the bundle's images at another path was refused ('not a folder here; put them
    there'), with no way to name where they are: `--inputs DIR` is taken on the images' digest."""
    from harness.run.preflight import inputs_sha256
    from harness.scenario.settings import FolderInputs
    from tests.labelled_images import LABELS, draw

    folder = draw(tmp_path / "here" / "images", 4)
    base = read(GOLDEN, {"backend": {"null"}})
    scenario = base.scenario.model_copy(update={"inputs": FolderInputs(source="folder", path="images", labels=LABELS,
                                                                       samples=4)})
    digest = inputs_sha256(scenario, str(folder))
    assert digest is not None
    header = {**base.header, "input_folder": "/data/lab/images", "inputs_sha256": digest}
    original = replace(base, scenario=scenario, header=header)
    with pytest.raises(ConfigError, match="which is not a folder here; put them there, or give the folder that holds "
                                          "them here with --inputs DIR"):
        rerun.checked_inputs(original)
    assert rerun.checked_inputs(replace(original, inputs_here=folder)) == (str(folder), digest)
    other = draw(tmp_path / "other", 4, seed=1)
    with pytest.raises(ConfigError) as refused:
        rerun.checked_inputs(replace(original, inputs_here=other))
    assert str(refused.value) == (
        f"cannot rerun {GOLDEN}: its cells read images from /data/lab/images, given here as --inputs {other}, which "
        f"holds other images than they read (the SHA-256 of its labels file and images is "
        f"{inputs_sha256(scenario, str(other))}, the bundle records {digest}); give the folder of those images")
    unchecked = replace(original, inputs_here=folder, header={**header, "inputs_sha256": None})
    with pytest.raises(ConfigError, match="records no digest of the images its cells read"):
        rerun.checked_inputs(unchecked)
    with pytest.raises(ConfigError, match=r"--inputs .*: the cells of .* read no input folder \(inputs: synthetic\)"):
        rerun.checked_inputs(replace(base, inputs_here=folder))


def test_a_resume_of_a_reruns_bundle_sets_the_values_the_rerun_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], whole_machine: None) -> None:
    """A rerun sets `env:`'s variables to the original's values; its --resume passed on this shell's.
    Stopped before a cell was measured and resumed from a shell without OMP_NUM_THREADS=1, its cells
    ran unbound where the original's ran on one thread, and `compare` paired none of them; with a
    cell measured, the resume was refused for the value the rerun had set itself."""
    from harness.scenario.loading import sha256

    root = tmp_path / "rerun"
    shutil.copytree(GOLDEN, root)
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["env"] = ["OMP_NUM_THREADS", "KMP_AFFINITY"]
    header.update(scenario_sha256=sha256(header["scenario"]), rerun_of={
        "run_id": "20261201-000000-golden", "scenario_sha256": sha256(header["scenario"]),
        "variables": {"OMP_NUM_THREADS": "1", "KMP_AFFINITY": None}}, state="interrupted")
    (root / "bundle.json").write_text(json.dumps(header))
    for path in (root / "cells").glob("*.json"):  # as the rerun's cells saw them
        cell = json.loads(path.read_text())
        if isinstance((cell.get("environment") or {}).get("variables"), dict):  # a skipped cell has none
            cell["environment"]["variables"].update(OMP_NUM_THREADS="1")
            path.write_text(json.dumps(cell))
    for left in header["cells"][:2]:  # deleted so that they run again
        (root / "cells" / f"{left['id']}.json").unlink()
        shutil.rmtree(root / "cells" / left["id"], ignore_errors=True)
    manifest.write(root)
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(
        device="cpu", backends={"eager": BackendReport(available=True), "null": BackendReport(available=True)}))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("KMP_AFFINITY", "compact")
    assert main(["run", "--resume", str(root), "--dry-run"]) == 0, capsys.readouterr().err
    said = " ".join(capsys.readouterr().out.split())
    assert "OMP_NUM_THREADS=1 for the resumed cells, as the rerun set it for its cells (this shell: unset)" in said
    assert "KMP_AFFINITY=unset for the resumed cells, as the rerun set it for its cells (this shell: compact)" in said
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["KMP_AFFINITY"] == "compact"  # this shell's again
    # a rerun of this bundle records the values it sets, for its own resume
    assert read(root, None).rerun_of["variables"] == {"OMP_NUM_THREADS": "1", "KMP_AFFINITY": None}
    console = Console(record=True)
    with rerun.variables_resumed({"rerun_of": {"run_id": "x"}}, console):  # a rerun that set none, or any other run
        assert "OMP_NUM_THREADS" not in os.environ
    assert console.export_text() == ""
