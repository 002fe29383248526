"""`container` as a native run: what the run would refuse is refused on the host before an engine is
asked (an `--out` inside a bundle, which the run in the image, seeing only its mount, wrote into;
`--jobs 0`; a file as `--out`); the scenario file is found by its suffix in any case, as run.sh finds
it; the harness's own settings and the variables the scenario's `env:` passes on reach the run in
the image, and those that would move a figure and do not are named; a dry run leaves no folder,
and a run under --no-cache mounts no cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.validate import validate
from harness.cli.main import main
from harness.container import launcher
from harness.container.launcher import container_arguments, launch, passed_variables, run_request
from harness.errors import ConfigError
from tests.unit.test_containers import FakeClient, FakeImage

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}"


@pytest.mark.parametrize("option", ["--out", "--cache-dir"])
def test_a_folder_inside_a_bundle_is_refused_before_an_engine_is_asked(option: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The run in the image sees its mount alone: it wrote a bundle into the bundle around it (exit 0),
    which `validate` then called invalid."""
    bundle = tmp_path / "earlier"
    shutil.copytree(GOLDEN, bundle)
    argv = ["container", "cpu", str(REPO / "scenarios" / "smoke.yaml"), option, str(bundle / "inner")]
    if option == "--cache-dir":
        argv += ["--out", str(tmp_path / "results")]
    assert main(argv) == 2
    assert f"{option} {bundle / 'inner'} is inside the bundle {bundle}" in " ".join(capsys.readouterr().err.split())
    assert validate(bundle).ok and not (tmp_path / "results").exists()


@pytest.mark.parametrize("options, said", [
    (["--jobs", "0"], "--jobs 0"),
    (["--out", "FILE"], "a file, not a directory"),
])
def test_what_the_run_would_refuse_at_once_is_refused_on_the_host(options: list[str], said: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--jobs 0` started the engine and looked the image up before the run inside refused it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("")
    assert main(["container", "cpu", str(REPO / "scenarios" / "smoke.yaml"), "--no-cache", *options]) == 2
    assert said in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_a_scenario_named_in_capitals_is_found_in_the_image(tmp_path: Path) -> None:
    """run.sh takes `SMOKE.YAML` for a scenario; the launcher did not, and the run inside found no such file."""
    shouting = tmp_path / "SMOKE.YAML"
    shutil.copy(REPO / "scenarios" / "smoke.yaml", shouting)
    with pytest.raises(ConfigError, match="must be inside the repository"):  # seen as a scenario file, as run.sh sees it
        container_arguments([str(shouting)], REPO, tmp_path)


def test_the_harness_settings_and_the_scenarios_env_reach_the_run_in_the_image(tmp_path: Path) -> None:
    """FUSIONBENCH_NOISE_PROBE_S=0.2 was silently dropped (and =abc, which a native run refuses, ran)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text((REPO / "scenarios" / "smoke.yaml").read_text() + "env: [OMP_NUM_THREADS, MY_FLAG=1]\n")
    environ = {"FUSIONBENCH_NOISE_PROBE_S": "0.2", "OMP_NUM_THREADS": "3", "MY_FLAG": "from-host", "HOME": "/root",
               "KMP_AFFINITY": "compact"}
    assert passed_variables([str(scenario)], environ) == {"FUSIONBENCH_NOISE_PROBE_S": "0.2", "OMP_NUM_THREADS": "3"}
    request = run_request("cpu", FakeImage(), [str(REPO / "scenarios" / "smoke.yaml")], REPO, tmp_path, tmp_path / "c",
                          environ)
    assert request["environment"]["FUSIONBENCH_NOISE_PROBE_S"] == "0.2" and "OMP_NUM_THREADS" not in request["environment"]
    # a resume: the scenario its bundle stores
    bundle = tmp_path / "run"
    shutil.copytree(GOLDEN, bundle)
    header = json.loads((bundle / "bundle.json").read_text())
    header["scenario"]["env"] = ["OMP_NUM_THREADS"]
    (bundle / "bundle.json").write_text(json.dumps(header))
    assert passed_variables(["--resume", str(bundle)], environ)["OMP_NUM_THREADS"] == "3"


def test_a_dry_run_leaves_no_folder_and_no_cache_mounts_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run in the image made its --out and the cache folder; --no-cache still made and mounted the cache."""
    monkeypatch.chdir(REPO)
    client = FakeClient(has_image=True)
    out, cache = tmp_path / "new" / "results", tmp_path / "cache"
    launch("cpu", ["scenarios/smoke.yaml", "--dry-run", "--out", str(out)], repo=REPO, cache=cache,
           make_client=lambda: client, write=lambda text: None)
    assert list(tmp_path.iterdir()) == []
    launch("cpu", ["scenarios/smoke.yaml", "--no-cache", "--out", str(out)], repo=REPO, cache=cache,
           make_client=lambda: client, write=lambda text: None)
    assert str(cache) not in client.runs[-1]["volumes"] and not cache.exists() and out.is_dir()


def test_a_name_the_scenario_passes_on_never_replaces_the_launchers_own(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`env: [HOME, FUSIONBENCH_IMAGE_ID]` gave the run the host's HOME, which its user cannot
    write, and a false image record."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text((REPO / "scenarios" / "smoke.yaml").read_text() + "env: [HOME, FUSIONBENCH_IMAGE_ID]\n")
    monkeypatch.chdir(REPO)
    host = {"HOME": "/root", "FUSIONBENCH_IMAGE_ID": "sha256:host"}
    assert passed_variables([str(scenario)], host) == host  # what the scenario asks for ...
    monkeypatch.setattr(launcher, "passed_variables", lambda args, environ: host)
    request = run_request("cpu", FakeImage(), ["scenarios/smoke.yaml"], REPO, tmp_path, tmp_path / "c", host)
    # ... and what the run in the image gets
    assert request["environment"]["HOME"] == "/tmp" and request["environment"]["FUSIONBENCH_IMAGE_ID"] == FakeImage.id


def test_a_resume_of_a_run_made_without_the_cache_asks_nothing_of_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It runs without the cache, none mounted: a default cache folder that cannot be made refused it."""
    results = tmp_path / "results"
    bundle = results / "run"
    shutil.copytree(GOLDEN, bundle)
    header = json.loads((bundle / "bundle.json").read_text())
    header["artifact_cache"] = None
    (bundle / "bundle.json").write_text(json.dumps(header))
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    launched: list[list[str]] = []
    monkeypatch.setattr("harness.container.launcher.launch", lambda kind, args, **_: launched.append(args) or 0)
    assert main(["container", "cpu", "--resume", str(bundle)]) == 0, capsys.readouterr().err
    assert launched == [["--resume", str(bundle)]]


def test_a_variable_that_would_move_a_figure_and_stays_on_the_host_is_named(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`OMP_NUM_THREADS=4 ./run.sh --container cpu ...` ran without it and said nothing, where a
    native run names the variables its cells do not get."""
    import os

    from harness.run.unseen_environment import moves_figures

    # only the variables set here: a test before this one that compiled with Inductor in this process
    # left TORCHINDUCTOR_CACHE_DIR set (torch sets it), which the warning then named too
    for name in [name for name in os.environ if moves_figures(name)]:
        monkeypatch.delenv(name)
    scenario = "scenarios/smoke.yaml"
    monkeypatch.setattr(launcher, "_named_variables", lambda args: ["KMP_AFFINITY"])  # its env: (the file must be in the repository)
    for name, value in {"OMP_NUM_THREADS": "4", "CUDA_VISIBLE_DEVICES": "1", "KMP_AFFINITY": "compact",
                        "CUDA_HOME": "/usr/local/cuda", "CUDA_VERSION": "13.0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(REPO)
    client, said = FakeClient(has_image=True), []
    launch("cpu", [scenario, "--out", str(tmp_path / "r")], repo=REPO, cache=tmp_path / "c",
           make_client=lambda: client, write=said.append)
    warned = [line for line in "".join(said).splitlines() if line.startswith("fusionbench: warning: ")]
    assert len(warned) == 1 and warned[0].startswith("fusionbench: warning: CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS are "
                                                     "set here but no cell sees them: the run in the image"), said
    assert "OMP_NUM_THREADS" not in client.runs[-1]["environment"]
    said.clear()
    launch("cpu", [scenario, "--out", str(tmp_path / "r"), "--dry-run"], repo=REPO, cache=tmp_path / "c",
           make_client=lambda: client, write=said.append)
    assert "warning" not in "".join(said)  # a dry run runs no cell, as natively
