"""The variables set where a run starts that can move a figure and that no cell will see.

A cell's worker gets a whitelisted environment (harness/run/isolation.py): `OMP_NUM_THREADS=4
./run.sh ...` does not reach the cells unless the scenario names the variable in `env:`. A user who
sets one expects it to count, so the run says, once, which such variables it leaves behind.

A variable a plugin reads (its weights' folder, a config's path) is no figure's: the plugin finds it
in `fusionbench models` and as the run plans its cells, and each worker, which never got it, fails
(`build: KeyError: 'ACME_WEIGHTS'`) or runs the plugin's default. What the plugin's own code was seen
to look up (harness/models/plugin_reads.py) is said as the run starts where its package read it as it
loaded (`read_as_loaded`), and by each cell whose worker lacked it (`read_by_plugin`); a failed cell's
reason that names such a variable says so, and the fix (`not_passed_in`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.models import plugins
from harness.run.isolation import passed_on

#: How a failed worker's words name a variable: in capitals, bare or quoted (`KeyError: 'ACME_WEIGHTS'`).
_VARIABLE = re.compile(r"(?<![A-Za-z0-9_])[A-Z_][A-Z0-9_]+(?![A-Za-z0-9_])")

#: The families of variables that change what a library runs or how fast: thread pools and their
#: placement, the allocator, math modes, compilers' and runtimes' own settings.
FIGURE_MOVING_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "DNNL_", "ONEDNN_", "TORCH", "PYTORCH_",
                          "TRITON_", "CUDA_", "CUBLAS", "CUDNN_", "NVIDIA_TF32_OVERRIDE", "ORT_", "TVM_", "MALLOC_")
FIGURE_MOVING_NAMES = ("LD_PRELOAD", "GLIBC_TUNABLES")
#: Of those families, the names that only describe a build, as CUDA and PyTorch images set them.
DESCRIPTIVE = ("CUDA_VERSION", "CUDA_DRIVER_VERSION", "PYTORCH_VERSION", "PYTORCH_BUILD_VERSION",
               "PYTORCH_BUILD_NUMBER", "TORCH_CUDA_ARCH_LIST")


WORKER = "a cell's worker gets a whitelisted environment"
#: What a resume and a rerun share: neither reads a scenario file, and a resume refuses values of env:'s
#: variables other than its measured cells saw (docs/cli.md).
STORED = "a resume or a rerun runs the scenario its bundle stores"


def moves_figures(name: str) -> bool:
    """Whether a variable of this name can move a figure (not one that only describes a build)."""
    return (name in FIGURE_MOVING_NAMES or name.startswith(FIGURE_MOVING_PREFIXES)) and name not in DESCRIPTIVE


def unseen(parent: Mapping[str, str], named: Sequence[str]) -> list[str]:
    """The names of `parent`'s variables that can move a figure and that a worker of a scenario
    naming `named` in `env:` would not get, sorted."""
    return sorted(name for name in parent if moves_figures(name) and not passed_on(name, named))


def warning(names: Sequence[str], why: str = WORKER, stored_scenario: bool = False) -> str:
    """The run's one line about `names` (from `unseen`); `why` says where they stop; `stored_scenario`:
    the run runs the scenario its bundle stores (a resume, a rerun), whose env: no one edits."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return (f"{shown} {'is' if len(names) == 1 else 'are'} set here but no cell sees "
            f"{'it' if len(names) == 1 else 'them'}: {why}; "
            + (f"{STORED}, whose env: no one edits: name a variable in that scenario's env: (its bundle.json `scenario`) "
               "and run it afresh with `fusionbench run` to pass it on" if stored_scenario
               else "name a variable in the scenario's env: to pass it on"))


def _names(name: str, reason: str) -> bool:
    """Whether `reason` names the variable `name` as a word of its own (`ACME` is not named by `ACME_WEIGHTS`)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", reason) is not None


def _withheld(name: str, parent: Mapping[str, str], named: Sequence[str], worker: Mapping[str, object] | None) -> bool:
    """Whether `parent` (this shell) sets `name` and the worker did not get it: not passed on for the
    scenario's `env:` (`named`), nor in `worker`, its environment as it recorded it."""
    return name in parent and not passed_on(name, named) and name not in (worker or {})


def pass_it_on(names: Sequence[str], stored_scenario: bool = False) -> str:
    """How to give the workers `names`, variables of this shell: in the scenario's `env:`; of a run
    of the scenario its bundle stores (`stored_scenario`: a resume, a rerun), whose env: no one
    edits, by running that scenario afresh."""
    one, listed = len(names) == 1, ", ".join(names)
    if stored_scenario:  # the stored scenario's env: cannot be edited, and such a run passes on no other variable
        return (f"{STORED}, whose env: does not name {'it' if one else 'them'}, and gives its workers no other variable "
                f"of this shell: take that scenario (its bundle.json `scenario`), add {'it' if one else 'them'} to its "
                f"env: (`env: [{listed}]`) and run it afresh with `fusionbench run`")
    return (f"add {'it' if one else 'them'} to the scenario's env: (`env: [{listed}]`, which records "
            f"{'its value' if one else 'their values'} in each cell)")


def not_passed_in(reasons: Sequence[str], parent: Mapping[str, str], named: Sequence[str],
                  worker: Mapping[str, str] | None, stored_scenario: bool = False, read: Sequence[str] = ()) -> list[str]:
    """A failed cell's `reasons`, each that names a variable of `parent` (this process's environment)
    that its worker did not get (not passed on for the scenario's `env:`, `named`, nor in `worker`,
    its environment as it recorded it) followed by which and how to pass it on (`pass_it_on`;
    `stored_scenario`: the cell is a resume's or a rerun's; `read`: the names its plugin model's code was
    seen to look up and not find, environment `plugin_reads_unset`, named where the reason holds them in
    any case, `KeyError: 'acme_dir'`).
    Names alone, never values: the variable may hold a token. Given before a reason ends naming the
    worker's whole log (harness/run/sweep.py adds that last), as the run's last lines read it."""
    told = []
    for reason in reasons:
        names = sorted({name for name in [*_VARIABLE.findall(reason), *(name for name in read if _names(name, reason))]
                        if _withheld(name, parent, named, worker)})
        if names:
            one = len(names) == 1
            reason += (
                f"; {', '.join(names)} {'is' if one else 'are'} set in this shell but not passed to workers: "
                f"{pass_it_on(names, stored_scenario)}")
        told.append(reason)
    return told


def read_by_plugin(environment: Mapping[str, object], reasons: Sequence[str], parent: Mapping[str, str],
                   named: Sequence[str], stored_scenario: bool = False) -> str:
    """A cell's warning where its plugin model's code looked up variables its worker did not have
    (its `environment`'s `plugin_reads_unset`: harness/models/plugin_reads.py) that `parent`, this
    shell, sets and the scenario's `env:` (`named`) does not pass on, and its `reasons` do not already
    name: the plugin read its default for each, or failed. "" where none."""
    read = environment.get("plugin_reads_unset")
    worker = environment.get("variables")
    names = sorted(name for name in (read if isinstance(read, list) else []) if isinstance(name, str)
                   and _withheld(name, parent, named, worker if isinstance(worker, dict) else None)
                   and not any(_names(name, reason) for reason in reasons))
    if not names:
        return ""
    one = len(names) == 1
    return (f"the plugin model's code looked up {', '.join(names)} in its worker's environment, which did not have "
            f"{'it' if one else 'them'}, though this shell sets {'it' if one else 'them'}: the cell ran with what the "
            f"plugin does without {'it' if one else 'them'} (a default), not with this shell's "
            f"{'value' if one else 'values'}; {pass_it_on(names, stored_scenario)}")


def read_as_loaded(models: Sequence[str], parent: Mapping[str, str], named: Sequence[str],
                   stored_scenario: bool = False) -> list[str]:
    """The run's warnings, as it starts, where a plugin package's modules looked up variables as they
    loaded in this process (harness/models/plugin_reads.py) that `parent` sets and the scenario's `env:`
    (`named`) does not pass on: each worker loads them without those. One a package, naming its models
    among `models` (the reads are its package's, whichever model's entry point loaded them); none where
    there are none, or for a model that is no plugin's. A variable that moves figures is left out: the
    run's line of variables no cell sees (`warning`) says it, and a `--jobs` slot gives each worker
    its own OMP_NUM_THREADS, MKL_NUM_THREADS, CUDA_VISIBLE_DEVICES. What a `build` reads is seen in
    the worker alone: each cell says it (`read_by_plugin`)."""
    found = plugins.found()
    packages: dict[tuple[str, str, str], list[str]] = {}
    for model in dict.fromkeys(models):
        plugin = found.models.get(model)
        if plugin is not None:
            packages.setdefault((plugin.distribution, plugin.version, plugin.package_files), []).append(model)
    told = []
    for (distribution, version, _), ran in packages.items():
        names = sorted({read.name for model in ran for read in found.load_reads.get(model, [])
                        if _withheld(read.name, parent, named, None) and not moves_figures(read.name)})
        if not names:
            continue
        one, alone = len(names) == 1, len(ran) == 1
        who = f"model {ran[0]!r}" if alone else f"models {', '.join(map(repr, ran[:-1]))} and {ran[-1]!r}"
        told.append(f"{who} from {distribution} {version} {'looks' if alone else 'look'} up {', '.join(names)} as "
                    f"{'its module loads' if alone else 'their package loads'}, set in this shell, which no cell's "
                    f"worker gets: each loads it without {'it' if one else 'them'}, and runs the plugin's default or "
                    f"fails; {pass_it_on(names, stored_scenario)}")
    return told
