"""The command line: help, models, schema, and bad input that writes nothing and exits 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli.main import main


def fusionbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_run_help_shows_a_default_cache_folder_with_a_percent_sign(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """argparse formats help with %: a cache folder under `/tmp/100%x` raised a TypeError with its traceback."""
    from harness.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", "/tmp/100%x")
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0 and "/tmp/100%x/fusionbench" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_help_lists_commands() -> None:
    done = fusionbench("--help")
    assert done.returncode == 0
    for command in ("run", "backends", "models", "schema", "validate", "compare", "report", "pack", "container"):
        assert command in done.stdout
    run_help = fusionbench("run", "--help").stdout
    for option in ("--device", "--only", "--out", "--resume"):
        assert option in run_help
    # as docs/cli.md says it, and as Ray picks it: it said "start a local Ray instance", which a run
    # does only where neither RAY_ADDRESS nor an earlier `ray start` names a cluster
    assert "(default: RAY_ADDRESS, else the cluster the last `ray start` on this machine made, else a local Ray " \
           "instance)" in " ".join(run_help.split())


def test_models_and_family_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--family", "mobilenetv3"]) == 0
    out = capsys.readouterr().out
    assert "mobilenet_v3_small" in out and "resnet18" not in out
    assert main(["models", "--family", "ResNet"]) == 0  # as the README writes the families
    assert "resnet18" in capsys.readouterr().out
    for family in ("nope", ""):  # an empty family is none, not every model
        assert main(["models", "--family", family]) == 2
        assert "families:" in capsys.readouterr().err
    assert main(["models", "--family", "inception"]) == 0  # the sizes a scenario may ask of it
    assert re.search(r"inception_v3 .* 75 and up ", capsys.readouterr().out)


def test_schema_command_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "FusionBench scenario file" and "models" in schema["required"]
    assert main(["schema", "--file", "cell", "--version", "1"]) == 0
    cell_v1 = json.loads(capsys.readouterr().out)
    assert cell_v1["title"].endswith("schema version 1") and cell_v1["properties"]["schema_version"] == {"const": 1}
    assert main(["schema", "--file", "bundle"]) == 0
    assert "state" in json.loads(capsys.readouterr().out)["required"]
    assert main(["schema", "--file", "bundle", "--version", str(SCHEMA_VERSION + 1)]) == 2
    assert f"no schema version {SCHEMA_VERSION + 1}" in capsys.readouterr().err
    assert main(["schema", "--version", "5"]) == 2  # scenario files have one schema: not ignored
    assert "--version goes with --file bundle or --file cell" in capsys.readouterr().err


@pytest.mark.slow
def test_the_probe_says_whether_eager_can_run_on_cuda() -> None:
    import torch

    from harness.run.probe import probe

    # the probe's own answer for cuda, in this process: the CLI's path to it (`backends --device cpu
    # --json`) is tests/integration/test_plugin_end_to_end.py's, one call for the built-in backends and the plugin
    cuda = probe("cuda", ["eager"], with_system=False, noise_s=0.0)
    if not torch.cuda.is_available():
        assert not cuda["backends"]["eager"]["available"]
        assert "no CUDA device" in cuda["backends"]["eager"]["reason"]
    else:
        assert cuda["backends"]["eager"]["available"] and cuda["device"] == "cuda"


def test_backends_shows_a_plugins_text_as_written(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A reason with brackets was read as rich markup: `[/opt/x]` a traceback, `mypkg[gpu]` dropped."""
    from harness.run import probe
    from harness.run.probe_answer import ProbeAnswer

    answer = ProbeAnswer(device="cpu", backends={
        "myplugin": {"available": False, "reason": "install mypkg[gpu] first; libs in [/opt/x]", "versions": {"mypkg": "1[2]"}}})
    monkeypatch.setattr(probe, "run_probe", lambda *a, **k: answer)
    assert main(["backends", "--device", "cpu"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "mypkg[gpu]" in shown and "[/opt/x]" in shown and "mypkg 1[2]" in shown


def test_a_run_refused_before_its_probe_leaves_none_of_the_folders_it_made(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`--out` and `--cache-dir` are made before the probe is asked; a refusal there left them, empty."""
    scenario = tmp_path / "one.yaml"
    scenario.write_text("device: cpu\nmodels: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    (tmp_path / "kept").mkdir()
    monkeypatch.setenv("FUSIONBENCH_NOISE_PROBE_S", "abc")
    assert main(["run", str(scenario), "--out", str(tmp_path / "results" / "today"),
                 "--cache-dir", str(tmp_path / "kept" / "cache" / "fb")]) == 2
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["kept", "one.yaml"]


@pytest.mark.parametrize("options, said", [
    (["--jobs", "99"], "--jobs 99: each cell needs a core of its own"),
    (["--cache-dir", "{tmp}/a-file/cache"], "--cache-dir {tmp}/a-file/cache: cannot create it"),
    (["--out", "{tmp}/a-file/results"], "--out {tmp}/a-file/results: cannot create it"),
    (["--executor", "ray", "--cpus-per-cell", "0"], "--cpus-per-cell 0: give 1 or more"),
])
def test_a_dry_run_refuses_the_options_the_run_would_refuse_before_asking_the_backends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], options: list[str],
        said: str) -> None:
    """`--dry-run --jobs 99` listed the cells and exited 0 where the run itself is refused."""
    from harness.run import plan

    scenario = tmp_path / "one.yaml"
    scenario.write_text("device: cpu\nmodels: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: pytest.fail("the backends were asked"))
    assert main(["run", str(scenario), "--dry-run", *(o.format(tmp=tmp_path) for o in options)]) == 2
    assert said.format(tmp=tmp_path) in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "one.yaml"]


@pytest.mark.parametrize("dry", [True, False])
def test_a_default_cache_folder_that_cannot_be_made_is_named_as_the_default_with_the_ways_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dry: bool) -> None:
    """Under a read-only HOME (a batch node's) every run stopped at "--cache-dir
    /home/u/.cache/fusionbench: cannot create it (Permission denied)": an option the user never
    gave, and no word of --cache-dir elsewhere or --no-cache. A file stands in for the read-only
    HOME here: the suite runs as root, who may write anywhere."""
    from harness.run import plan

    scenario = tmp_path / "one.yaml"
    scenario.write_text("device: cpu\nmodels: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: pytest.fail("the backends were asked"))
    assert main(["run", str(scenario), "--out", str(tmp_path / "results"), *(["--dry-run"] if dry else [])]) == 2
    assert capsys.readouterr().err == (
        f"fusionbench: error: the default --cache-dir {tmp_path / 'a-file' / 'fusionbench'}: cannot create it (Not a "
        "directory); give --cache-dir a folder of your own, or --no-cache to run without the cache\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "one.yaml"]


def test_backends_shows_a_long_reason_to_its_file_and_line(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin that failed to import ends its reason with the file and line; the table cut it short."""
    from harness.run import probe
    from harness.run.probe_answer import ProbeAnswer

    where = "/work/site-packages/a_plugin_with_a_long_name/very/deep/folder/structure/backend_module.py:20"
    answer = ProbeAnswer(device="cpu", backends={"myplugin": {
        "available": False, "reason": f"ImportError: cannot import name 'Thing' from 'somewhere' (at {where})",
        "versions": {"torch": "2.14.1+cu130", "fusionbench-myplugin": "0.0.1"}}})
    monkeypatch.setattr(probe, "run_probe", lambda *a, **k: answer)
    assert main(["backends", "--device", "cpu"]) == 0
    shown = "".join(line.strip(" │┃") for line in capsys.readouterr().out.splitlines())
    assert "backend_module.py:20" in shown and "…" not in shown


@pytest.mark.parametrize(
    "text, expected",
    [
        ("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\nbogus: 1\n", "unknown key 'bogus'"),
        ("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\nloadgen: {min_duration_s: -1}\n", "greater than 0"),
        ("models: [resnet18\n", "invalid YAML"),
    ],
)
@pytest.mark.slow
def test_bad_scenario_exits_2_and_writes_nothing(tmp_path: Path, text: str, expected: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(text)
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fusionbench: error: {scenario}") and expected in lines[0]
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_each_problem_of_a_scenario_file_is_a_line_of_its_own(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [eagre]\nscenarios: [Sideways]\n")
    assert main(["run", str(scenario), "--out", str(tmp_path / "results")]) == 2
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith(f"fusionbench: error: {scenario}:2: backends[0].name: unknown backend 'eagre'")
    assert first.endswith("(and 1 more problem)")
    assert second == (f"fusionbench: error: {scenario}:3: scenarios[0]: Input should be 'SingleStream', 'MultiStream', "
                      "'Server' or 'Offline'")
    assert not (tmp_path / "results").exists()


def test_missing_input_folder_is_caught_before_writing(tmp_path: Path) -> None:
    scenario = tmp_path / "folder.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\n"
                        "inputs: {source: folder, path: no-such-images}\n")
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out))
    assert done.returncode == 2 and f"{scenario}: inputs.path: {tmp_path / 'no-such-images'} is not a directory" in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_bad_only_and_missing_file(tmp_path: Path, repo: Path) -> None:
    out = tmp_path / "results"
    done = fusionbench("run", str(repo / "scenarios" / "smoke.yaml"), "--only", "model=vgg11", "--out", str(out))
    assert done.returncode == 2 and "matches no cell" in done.stderr and not out.exists()
    assert "probing" not in done.stdout  # refused before the machine is probed
    done = fusionbench("run", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2 and "no such scenario file" in done.stderr
    done = fusionbench("run")
    assert done.returncode == 2 and "needs a scenario file" in done.stderr


def test_run_sh_hands_resume_to_the_run_command(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    want = subprocess.run("cat requirements.lock pyproject.toml | sha256sum", shell=True, cwd=repo,
                          capture_output=True, text=True).stdout.split()[0]
    stamp = Path(sys.prefix) / ".fusionbench-lock"
    if not stamp.is_file() or stamp.read_text().strip() != want:
        pytest.skip("the tests do not run in the environment run.sh prepared; run.sh would reinstall it")
    missing = tmp_path / "no-such-run"
    done = subprocess.run([str(repo / "run.sh"), "--resume", str(missing)], capture_output=True, text=True,
                          env={**os.environ, "FUSIONBENCH_VENV": sys.prefix}, timeout=120)
    assert done.returncode == 2
    assert "invalid choice" not in done.stderr and str(missing) in done.stderr
    assert not missing.exists()


def test_run_refuses_rounds_out_of_range_before_reading_the_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for wrong in ("0", "21"):
        assert main(["run", str(tmp_path / "absent.yaml"), "--rounds", wrong]) == 2
        assert f"--rounds {wrong}: a number from 1 to 20" in capsys.readouterr().err


def test_run_refuses_no_jobs_and_an_empty_only_before_anything_is_made(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path, repo: Path) -> None:
    """Refused with nothing made: `--jobs 0` was refused only after the probe (seconds) had made the
    output and cache folders, and `--only ""` ran every cell."""
    out, cache = tmp_path / "results", tmp_path / "cache"
    scenario = str(repo / "scenarios" / "smoke.yaml")
    for option, said in ((["--jobs", "0"], "--jobs 0: give 1 or more"), (["--only", ""], "give at least one KEY=VALUE")):
        assert main(["run", scenario, "--out", str(out), "--cache-dir", str(cache), *option]) == 2
        assert said in capsys.readouterr().err
        assert not out.exists() and not cache.exists()


def test_run_refuses_only_given_twice_before_anything_is_made(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             repo: Path) -> None:
    """`--only model=resnet18 --only backend=null` ran every model's null cells: the last --only alone counted."""
    out = tmp_path / "results"
    scenario = str(repo / "scenarios" / "smoke.yaml")
    golden = str(repo / "tests" / "golden" / "v12")
    for argv in (["run", scenario], ["rerun", golden]):  # one check of --only for both commands
        assert main([*argv, "--out", str(out), "--only", "model=resnet18", "--only", "backend=null"]) == 2
        assert ("--only is given 2 times; give it once, its KEY=VALUE pairs joined by commas "
                "(--only model=resnet18,backend=null)") in capsys.readouterr().err
        assert not out.exists()


def test_a_resume_takes_no_out_but_its_bundles_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A resume writes into the bundle it resumes: another --out was ignored without a word."""
    run = tmp_path / "results" / "run-1"
    assert main(["run", "--resume", str(run), "--out", str(tmp_path / "elsewhere")]) == 2
    assert f"a resume writes into the bundle it resumes ({run}); give no --out" in capsys.readouterr().err
    assert main(["run", "--resume", str(run), "--out", str(tmp_path / "results")]) == 2  # its own folder: allowed
    assert "no such file or directory" in capsys.readouterr().err  # as without --out (the bundle is not there)
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("option", ["--out", "--cache-dir"])
def test_a_run_never_writes_into_a_bundle(capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path,
                                          option: str) -> None:
    """A run given a bundle (or a folder inside one) as its output or cache folder would add files
    the bundle's manifest does not list, and validate would then refuse that bundle."""
    import shutil

    from harness.bundle.migrations import SCHEMA_VERSION
    from harness.bundle.validate import validate

    bundle = tmp_path / "earlier"
    shutil.copytree(repo / "tests" / "golden" / f"v{SCHEMA_VERSION}", bundle)
    for inside in (bundle, bundle / "cells" / "more"):
        elsewhere = [] if option == "--out" else ["--out", str(tmp_path / "results")]
        argv = ["run", str(repo / "scenarios" / "smoke.yaml"), *elsewhere, option, str(inside)]
        assert main(argv) == 2
        assert f"{option} {inside} is inside the bundle {bundle}" in capsys.readouterr().err.replace("\n", "")
    assert validate(bundle).ok and not (bundle / "cells" / "more").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("argv", [["run", "scenarios/smoke.yaml", "--out", ""], ["run", "scenarios/smoke.yaml", "--cache-dir", ""],
                                  ["run", ""], ["report", "tests/golden/v9", "--out", ""], ["validate", ""]])
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(argv: list[str], tmp_path: Path, repo: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`--out ''` (an unset variable) wrote a bundle, a report or the cache into the folder the command ran in."""
    monkeypatch.chdir(tmp_path)
    argv = [str(repo / a) if a.startswith(("scenarios/", "tests/")) else a for a in argv]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, said", [
    (["run", "scenarios/smoke.yaml", "--dryrun"],
     "fusionbench run: error: unrecognized arguments: --dryrun (did you mean '--dry-run'"),
    (["compare", "--treshold", "0.1", "a", "b"],
     "fusionbench compare: error: unrecognized arguments: --treshold b (did you mean '--threshold'?)"),
    (["vaidate", "results/x"], "fusionbench: error: argument COMMAND: invalid choice: 'vaidate'"),
    (["--dry-run", "scenarios/smoke.yaml"], "(a scenario file follows `run`: fusionbench run scenarios/smoke.yaml [OPTIONS])"),
    (["Tiny.YAML"], "(a scenario file follows `run`: fusionbench run Tiny.YAML [OPTIONS])"),
    (["pack", "results/x"], "fusionbench pack: error: the following arguments are required: --org"),
    (["run", "scenarios/smoke.yaml", "--device", "gpu"], "fusionbench run: error: argument --device: invalid choice: 'gpu'"),
    (["engine", "statsu"], "'status') (did you mean 'status', 'start'?)"),
    (["image", "biuld", "cpu"], "(did you mean 'build'?)"),
])
def test_a_mistake_in_the_arguments_is_one_line_with_the_nearest_name(argv: list[str], said: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """argparse printed its usage first (up to seven lines) and suggested nothing for `--dryrun`."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and len(err.splitlines()) == 1 and said in err, err
    assert err.rstrip().endswith("--help` says what it takes")
    if argv[0] == "vaidate":
        assert "(did you mean 'validate'?)" in err


def test_schema_never_writes_into_a_bundle_and_run_names_an_out_that_is_a_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path) -> None:
    import shutil

    from harness.bundle.migrations import SCHEMA_VERSION
    from harness.bundle.validate import validate

    bundle = tmp_path / "run"
    shutil.copytree(repo / "tests" / "golden" / f"v{SCHEMA_VERSION}", bundle)
    assert main(["schema", "--file", "bundle", "--out", str(bundle / "bundle.json")]) == 2  # it replaced the header
    assert "is inside the bundle" in capsys.readouterr().err and validate(bundle).ok
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["run", str(repo / "scenarios" / "smoke.yaml"), "--out", str(afile)]) == 2
    assert f"--out {afile}: a file, not a directory" in capsys.readouterr().err  # was "cannot create it (File exists)"


@pytest.mark.parametrize("argv", [["models"], ["schema", "--file", "cell"]])
def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(argv: list[str], repo: Path) -> None:
    """`fusionbench models | head`: rich exited 1 (a cell failed, by the table), schema said '?: Broken pipe'."""
    child = subprocess.Popen([sys.executable, "-m", "harness.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=repo)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # before it writes a byte: it starts in about a second
    assert child.wait(timeout=120) == 141 and child.stderr.read() == b""


def test_a_write_that_fails_after_its_file_opened_names_the_output(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    golden = repo / "tests" / "golden"
    assert main(["compare", str(golden / "v9"), str(golden / "v10"), "--out", "/dev/full"]) == 2
    assert "fusionbench: error: --out /dev/full: No space left on device" in capsys.readouterr().err  # was "?: ..."


def test_compare_replaces_only_a_comparison_it_wrote(capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path) -> None:
    """`compare A B --out s.yaml` replaced the scenario file without a word."""
    golden = repo / "tests" / "golden"
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\n")
    assert main(["compare", str(golden / "v9"), str(golden / "v10"), "--out", str(scenario)]) == 2
    assert scenario.read_text() == "models: [resnet18]\n"
    assert (f"fusionbench: error: --out {scenario}: a file compare did not write is there, and would be replaced; give "
            "another path, or remove it first") in " ".join(capsys.readouterr().err.split())
    assert main(["compare", str(golden / "v9"), str(golden / "v10"), "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path}: a directory; give the path of the file to write" in capsys.readouterr().err
    for name, options in (("cmp.md", []), ("cmp.json", ["--format", "json"])):
        written = []
        for _ in range(2):  # written, then written again over itself
            main(["compare", str(golden / "v9"), str(golden / "v10"), "--out", str(tmp_path / name), *options])
            written.append((tmp_path / name).read_text())
            assert "error" not in capsys.readouterr().err
        assert written[0] == written[1] and len(written[0]) > 100


def test_schema_out_at_a_folder_is_named_as_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`schema --out DIR` said only `DIR: Is a directory`."""
    assert main(["schema", "--out", str(tmp_path)]) == 2
    assert f"fusionbench: error: --out {tmp_path}: a directory; give the path of the file to write" in capsys.readouterr().err


def test_compare_writes_over_an_empty_file(capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path) -> None:
    """An empty file holds nothing to lose: `--out "$(mktemp)"` was refused as a file compare did not write."""
    golden = repo / "tests" / "golden"
    made = tmp_path / "tmp.Xk3"
    made.touch()
    assert main(["compare", str(golden / "v9"), str(golden / "v10"), "--out", str(made)]) in (0, 1)
    assert "error" not in capsys.readouterr().err
    assert made.read_text().startswith("# FusionBench comparison\n")
