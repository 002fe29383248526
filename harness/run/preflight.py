"""What a run checks about its inputs and its output before any cell runs (and, for a new run,
before the bundle directory is made): the input folder exists and holds what the cells will read
(images, and a labels file whose classes the models score), the output and cache directories can
be written, and the file system has room for the cells' records and logs. Each failure is a
ConfigError that names what to fix.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import tempfile
from pathlib import Path

from harness.bundle.confine import output_path
from harness.errors import ConfigError, HarnessError
from harness.files.regular_file import open_regular
from harness.models.labels import output_classes, read_labels
from harness.models.zoo import IMAGE_SUFFIXES, folder_images
from harness.plain_text import visible
from harness.run.isolation import MIB
from harness.scenario.schema import ScenarioFile
from harness.scenario.settings import FolderInputs

ROOM_BASE_BYTES = 16 * MIB
ROOM_PER_CELL_BYTES = 2 * MIB


def input_folder(scenario: ScenarioFile, scenario_dir: Path) -> str | None:
    """The scenario's input folder, resolved against the scenario file's directory; None for
    synthetic inputs. ConfigError when it is not a directory or its contents would fail the cells
    (`check_inputs`)."""
    inputs = scenario.inputs
    if not isinstance(inputs, FolderInputs):
        return None
    folder = (scenario_dir / inputs.path).resolve()
    if not folder.is_dir():
        raise ConfigError(f"inputs.path: {folder} is not a directory")
    check_inputs(scenario, folder)
    return str(folder)


def check_inputs(scenario: ScenarioFile, folder: Path) -> None:
    """Refuse an input folder that every cell would fail on only after building its model, or
    that would score its accuracy wrongly without saying so: no image in it; a labels file that
    cannot be read or has a line that is not `<image file> <class in digits 0-9>` (named by file
    and line); a class outside those a model of the scenario scores; or an image among the first
    `inputs.samples` the labels file lists that is not in the folder."""
    inputs = scenario.inputs
    if not isinstance(inputs, FolderInputs) or not inputs.labels:
        try:
            found = any(p.suffix.lower() in IMAGE_SUFFIXES and p.is_file() for p in folder.iterdir())
        except OSError as exc:
            raise ConfigError(f"inputs.path: {folder}: cannot list it ({exc.strerror})") from None
        if not found:
            raise ConfigError(f"inputs.path: {folder} has no {'/'.join(IMAGE_SUFFIXES)} images")
        return
    # The fewest classes any model scores bounds the labels (models without classes take no images).
    scorers = sorted((n, m.name) for m in scenario.models if (n := output_classes(m.name)) is not None)
    classes, scorer = scorers[0] if scorers else (None, "the model")
    labels = folder / inputs.labels
    try:
        pairs = read_labels(labels, classes, scorer)
    except HarnessError as exc:
        raise ConfigError(f"inputs.labels: {exc}") from None
    missing = [name for name, _ in pairs[: inputs.samples] if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"inputs.labels: {labels} lists {len(missing)} image(s) that are not files in {folder}, "
                          f"the first {missing[0]!r}")


def inputs_sha256(scenario: ScenarioFile, folder: str | None) -> str | None:
    """SHA-256 of what the cells read from the input folder: the labels file, then each image they
    read, in their order, as its name and its bytes (a resume or a second run that reads other
    images under the same names is told apart); None for synthetic inputs."""
    inputs = scenario.inputs
    if folder is None or not isinstance(inputs, FolderInputs):
        return None
    digest = hashlib.sha256()
    try:
        files = [Path(folder) / inputs.labels] if inputs.labels else []
        for file in files + folder_images(Path(folder), inputs.samples, inputs.labels):
            # a regular file only: a FIFO named like an image held the run before its bundle existed
            with open_regular(file, str(file), follow_links=True) as stream:
                # its name and length first: no two lists hash alike
                digest.update(f"{file.name}\0{os.fstat(stream.fileno()).st_size}\0".encode())
                while block := stream.read(1 << 20):
                    digest.update(block)
    except OSError as exc:
        raise ConfigError(f"inputs.path: {folder}: cannot read what the cells read ({exc.strerror})") from None
    except HarnessError as exc:
        raise ConfigError(f"inputs.path: cannot read what the cells read: {exc}") from None
    return digest.hexdigest()


def readable_images(scenario: ScenarioFile, folder: str | None) -> None:
    """Refuse an image the cells read that they could not: a file named .png that holds something
    else, or one cut short past its pixels; each cell would fail on it after building its model.
    Run after `inputs_sha256`, which refuses what is not a regular file."""
    inputs = scenario.inputs
    if folder is None or not isinstance(inputs, FolderInputs):
        return
    bad = [(file, why) for file in folder_images(Path(folder), inputs.samples, inputs.labels)
           if (why := unreadable_image(file)) is not None]
    if bad:
        first, why = bad[0]
        raise ConfigError(f"inputs.path: {len(bad)} of the images the cells read cannot be read as images, the first "
                          f"{visible(str(first))} ({visible(why)})")


def unreadable_image(file: Path) -> str | None:
    """Why the cells could not read `file` as the image they read, or None. `verify` checks the
    header and a PNG's chunks without decoding the pixels (a folder of 50,000 images in seconds);
    where it fails, the image is decoded whole as the cells decode it, since a PNG missing its end
    or with a bad checksum may still decode (and the cells read it). PIL picks its decoder by what
    the file holds, whatever its name, so any error it raises comes of the file and refuses it."""
    from PIL import Image

    try:
        with Image.open(file) as image:
            image.verify()
        return None
    except Exception:  # noqa: BLE001 - not yet a refusal: decoded whole below
        pass
    try:
        with Image.open(file) as image:
            image.convert("RGB")
        return None
    except Exception as exc:  # noqa: BLE001 - a hostile file's error is its refusal, said in one line
        return str(exc) or type(exc).__name__


def checked_inputs(scenario: ScenarioFile, path: Path) -> tuple[str | None, str | None]:
    """The scenario's input folder and the digest of what its cells will read (None, None for
    synthetic inputs); ConfigError, named by the scenario file, where the folder would fail them."""
    try:
        folder = input_folder(scenario, path.parent)
        digest = inputs_sha256(scenario, folder)
        readable_images(scenario, folder)
        return folder, digest
    except ConfigError as exc:  # named by the file that asks for the folder, as its other errors are
        raise ConfigError(f"{path}: {exc}") from None


#: What a refusal of a folder a run writes in tells the user to do.
OWN_FOLDER = "give a folder of your own"


def could_write(out_dir: Path, option: str = "--out", way_out: str = OWN_FOLDER) -> None:
    """Refuse, as `writable` would, a folder a run could not write its files in, and leave behind
    nothing it made to find out (`run --dry-run`)."""
    made = MadeFolders()
    try:
        writable(out_dir, option, made, way_out)
    finally:
        made.remove_left_empty()


class MadeFolders:
    """The folders a run is about to make (`--out`, `--cache-dir`): where it is refused before its
    bundle is made, those it made are removed again, if still empty once what the run put in them
    is gone (`fills`: the noise probe's cache), so that the refusal leaves nothing behind. A folder
    that was there before is never among them, nor is anything in it removed."""

    def __init__(self) -> None:
        self._chains: list[list[Path]] = []  # for each path noted, the folders it made, deepest first
        self._fills: list[Path] = []

    def note(self, path: Path) -> None:
        """Note the folders `path.mkdir(parents=True)` is about to make (`writable` calls it before)."""
        path = path.absolute()
        chain = []
        for folder in (path, *path.parents):
            if folder.exists() or folder.is_symlink():
                break
            # `a/../b` makes a and b (`a/..` is a, made when it is); with no `a`, b is not there as written, yet
            # may be, and is then not made here
            if folder.name != ".." and not os.path.lexists(os.path.normpath(folder)):
                chain.append(folder)
        self._chains.append(chain)

    def fills(self, path: Path) -> None:
        """Note `path`, which the run is about to make inside a noted folder or not at all: removed
        with the folders, where one of them holds it. One there already is not the run's: never noted."""
        if not (os.path.lexists(path) or os.path.lexists(os.path.normpath(path.absolute()))):
            self._fills.append(path.absolute())

    def remove_left_empty(self) -> None:
        """Remove what the run put into the noted folders it made (`fills`), then those still empty,
        each path's deepest first: a folder with anything else in it stays, and so do the folders
        above it on that path."""
        made = {folder for chain in self._chains for folder in chain}
        for path in self._fills:
            if made & {path, *path.parents}:
                shutil.rmtree(path, ignore_errors=True)
        for chain in self._chains:
            for folder in chain:
                try:
                    folder.rmdir()
                except FileNotFoundError:  # never made (its mkdir failed), or gone
                    continue
                except OSError:  # not empty
                    break


def cache_option(chosen: bool) -> tuple[str, str]:
    """How a refusal of the artifact cache's folder names it, and what to do instead: where the
    command line gave none, it is the default under HOME, which a batch node may mount read-only,
    and the line named a --cache-dir the user never gave and no way on."""
    return ("--cache-dir" if chosen else "the default --cache-dir",
            "give --cache-dir a folder of your own, or --no-cache to run without the cache")


def writable(out_dir: Path, option: str = "--out", made: MadeFolders | None = None, way_out: str = OWN_FOLDER) -> Path:
    """`out_dir`, created if need be, once a file could be written in it; else exit 2 naming `option`
    and `way_out`. Never inside a bundle (a run there would add files its manifest does not list):
    refused before anything is made. The folders it makes are noted in `made`, where given."""
    output_path(out_dir, [], option)
    try:
        if out_dir.exists() and not out_dir.is_dir():
            raise ConfigError(f"{option} {out_dir}: a file, not a directory; give a directory")
    except PermissionError as exc:  # a folder on its way this user may not enter (another user's 0700 home)
        raise ConfigError(f"{option} {out_dir}: not writable ({exc.strerror}: a folder on its way is closed to "
                          f"this user); {way_out}") from None
    if made is not None:
        made.note(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{option} {out_dir}: cannot create it ({exc.strerror}); {way_out}") from None
    probe = out_dir / ".fusionbench-write-test"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{option} {out_dir}: not writable ({exc.strerror}); {way_out}") from None
    return out_dir


#: Backends that build shared libraries in the run's temporary folder (each cell's scratch, under
#: TMPDIR) or in its cache and then load them: Inductor's C++ kernels, TVM's model and tuning candidates.
LOADS_BUILT_LIBRARIES = ("inductor", "tvm")


def _nearest_existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists: where a folder the run will make lies."""
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def noexec_mount(path: Path) -> Path | None:
    """The nearest existing folder at or above `path` where it lies on a file system mounted noexec
    (a library built there cannot be mapped executable); else None."""
    folder = _nearest_existing(path)
    try:
        return folder if os.statvfs(folder).f_flag & getattr(os, "ST_NOEXEC", 0) else None
    except OSError:
        return None


def check_a_gpu_is_seen(device: str, cuda_available: bool, scenario_path: Path | None, resume: Path | None,
                        rerun: Path | None = None) -> None:
    """Refuse a run on cuda where torch sees no CUDA device (`device`, `cuda_available`: the probe's
    answer): every cell would be skipped and the bundle marked complete (exit 0), and a later
    --resume on a GPU would find nothing left to run. `run --dry-run` refuses it as the run does."""
    if device != "cuda" or cuda_available:
        return
    if resume is not None:
        raise ConfigError(f"--resume {resume}: the bundle was run on cuda and torch sees no CUDA device on "
                          "this machine; resume it on a machine with a GPU")
    if rerun is not None:
        raise ConfigError(f"cannot rerun {rerun}: its cells ran on cuda and torch sees no CUDA device on this "
                          "machine; rerun it on a machine with a GPU")
    raise ConfigError(f"device cuda: torch sees no CUDA device on this machine; run {scenario_path} on a "
                      "machine with a GPU, or here with --device cpu")


def executable_mapping_refused(path: Path) -> str | None:
    """Why a file made at or above `path` (its nearest existing folder) cannot be mapped executable,
    as a built library is loaded (the loader maps it PROT_EXEC), where the mount's flags do not say
    so: a security policy refuses it (SELinux, for one). None where it can be, or where no file can
    be made there to try (what makes the run fail then is said by the checks of its own)."""
    try:
        handle = tempfile.TemporaryFile(dir=_nearest_existing(path))
    except OSError:
        return None
    with handle:
        try:
            handle.write(bytes(mmap.PAGESIZE))
            handle.flush()
        except OSError:
            return None
        try:  # private, as the loader maps a library
            mmap.mmap(handle.fileno(), mmap.PAGESIZE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC).close()
        except PermissionError as exc:
            return exc.strerror or type(exc).__name__
        except OSError:
            return None
    return None


def build_folders(backends: list[str], cache_dir: Path | None, temporary: Path | None = None) -> None:
    """ConfigError where a backend of `backends` would build a shared library it cannot then use:
    on a file system mounted noexec (a hardened host's /tmp), the temporary folder (TMPDIR: every
    cell's scratch, Inductor's kernels, TVM's tuning candidates) or the cache (TVM's model.so, the
    cross-core probe), or where a security policy refuses to map a file there executable though
    the mount allows it; or, for Inductor, under a TMPDIR with a space, which its C++ build splits
    its command at. Each failed every such cell, one by one, with the library's own error."""
    needing = [name for name in backends if name in LOADS_BUILT_LIBRARIES]
    if not needing:
        return
    temporary = temporary or Path(tempfile.gettempdir())
    if "inductor" in needing and any(character.isspace() for character in str(temporary)):
        raise ConfigError(f"the temporary folder (TMPDIR) {visible(temporary)} has a space in its path, and Inductor's "
                          "C++ build splits its command at spaces (every inductor cell would fail); set TMPDIR to a "
                          "folder whose path has none")
    places = [(temporary, "the temporary folder (TMPDIR)", "set TMPDIR to a folder on a file system mounted with exec, "
               "e.g. TMPDIR=$HOME/tmp", "set TMPDIR to a folder where the policy lets libraries load, e.g. TMPDIR=$HOME/tmp")]
    if cache_dir is not None:
        places.append((cache_dir, "--cache-dir", "give a --cache-dir on a file system mounted with exec",
                       "give a --cache-dir where the policy lets libraries load"))
    for path, what, fix, policy_fix in places:
        building = f"{', '.join(needing)} build shared libraries there and could not load them"
        mount = noexec_mount(path)
        if mount is not None:
            raise ConfigError(f"{what} {visible(path)} is on a file system mounted noexec ({visible(mount)}): {building}; {fix}")
        refused = executable_mapping_refused(path)
        if refused is not None:
            raise ConfigError(f"{what} {visible(path)}: a file there cannot be mapped executable ({refused}), though its "
                              f"file system is not mounted noexec: a security policy (SELinux, for one) refuses it, and "
                              f"{building}; {policy_fix}")


def check_room(path: Path, cells: int, resuming: bool = False) -> None:
    """Refuse to start when the bundle's file system is nearly full: a cell writes its record,
    worker log and LoadGen logs (well under 1 MiB); the report and manifest come at the end. A
    resumed run writes into its bundle where it is, so only making room helps there."""
    needed = ROOM_BASE_BYTES + ROOM_PER_CELL_BYTES * cells
    free = shutil.disk_usage(path).free
    if free < needed:
        remedy = ("make room on that file system (a resumed run writes into its bundle where it is)" if resuming
                  else "make room or choose another --out")
        raise ConfigError(
            f"{path}: only {free / MIB:.0f} MiB free; {cells} cell(s) need about {needed / MIB:.0f} MiB for their "
            f"records and logs: {remedy}"
        )
