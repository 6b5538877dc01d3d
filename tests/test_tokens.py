"""Token counting: the character estimate, directory scans, /tokenize and tokenizer.json."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from sparktop.errors import RuntimeFailure, UserError
from sparktop.model import NA
from sparktop.sweep.tokens import exact_tokens as ex
from sparktop.sweep.tokens import scan
from sparktop.sweep.tokens import tokens as tk
from sparktop.testing.http_stub import serve_threaded
from tests.fifo_helpers import finishes


def test_estimate_counts_cjk_one_to_one_and_the_rest_per_chars_per_token() -> None:
    count = tk.estimate_text_tokens("abcd" * 10)
    assert (count.tokens, count.cjk_chars, count.other_chars) == (10, 0, 40)
    mixed = tk.estimate_text_tokens("你好世界。かなカナ한국어" + "abcdefgh")
    assert mixed.cjk_chars == 12 and mixed.other_chars == 8
    assert mixed.tokens == 12 + 2 and mixed.method == "estimated" and not mixed.exact
    assert tk.estimate_text_tokens("abcdef", chars_per_token=2.0).tokens == 3
    with pytest.raises(ValueError):
        tk.estimate_text_tokens("x", chars_per_token=0)


def test_file_read_in_chunks_keeps_characters_split_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    # A 3-byte CJK character straddles the 1 MiB chunk boundary.
    path.write_bytes(b"a" * (tk.CHUNK_BYTES - 1) + "字".encode() + b"b" * 3)
    count = tk.count_file(path)
    assert count.cjk_chars == 1 and count.other_chars == tk.CHUNK_BYTES - 1 + 3
    assert count.tokens == int(1 + (tk.CHUNK_BYTES + 2) / 4)


def _tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x" * 400, encoding="utf-8")
    (root / "src" / "b.MD").write_text("中文" * 10, encoding="utf-8")
    (root / "notes.txt").write_text("y" * 40, encoding="utf-8")
    for skipped_dir in (".git", "node_modules", "__pycache__", ".hidden", "build"):
        (root / skipped_dir).mkdir()
        (root / skipped_dir / "c.py").write_text("z" * 4000, encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "huge.txt").write_text("h" * 5000, encoding="utf-8")
    (root / "dangling.txt").symlink_to(root / "nowhere")
    os.mkfifo(root / "pipe.txt")


def test_scan_directory_skips_and_counts(tmp_path: Path) -> None:
    _tree(tmp_path)
    count = scan.scan_directory(tmp_path, max_file_bytes=4096)
    assert count.files_counted == 3
    assert dict(count.skipped) == {
        "binary or not UTF-8": 2,
        "larger than 4,096 bytes": 1,
        "not a regular file (FIFO)": 1,
        "unreadable": 1,
    }
    assert count.files_skipped == 5
    assert (count.cjk_chars, count.other_chars) == (20, 440)
    assert count.tokens == 100 + 20 + 10


def test_fifos_sockets_and_devices_are_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    error = finishes(lambda: tk.count_file(fifo), fifo)
    assert isinstance(error, UserError)
    assert str(error) == (
        f"{fifo} is a FIFO, not a regular file; to count what a pipe carries, send it to "
        "standard input: --file -"
    )
    with pytest.raises(UserError, match=r"/dev/null is a character device, not a regular file$"):
        tk.count_file("/dev/null")
    (tmp_path / "link.txt").symlink_to(fifo)  # a symlink is followed to what it names
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s.sock"))
    try:
        (tmp_path / "ok.txt").write_text("abcd" * 3, encoding="utf-8")
        count = finishes(lambda: scan.scan_directory(tmp_path), fifo)
    finally:
        sock.close()
    assert isinstance(count, tk.TokenCount)
    assert dict(count.skipped) == {"not a regular file (FIFO)": 2, "not a regular file (socket)": 1}
    assert count.files_counted == 1 and count.tokens == 3


def test_scan_directory_extension_filter(tmp_path: Path) -> None:
    _tree(tmp_path)
    count = scan.scan_directory(tmp_path, ".py, md")
    assert count.files_counted == 2 and count.files_skipped == 0
    assert count.tokens == 100 + 20
    assert scan.normalise_exts(["PY", ".md", "py"]) == (".py", ".md")


def test_scan_directory_of_half_a_million_characters(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"m{i}.py").write_text("def f():\n    return 1\n" * 450, encoding="utf-8")
    count = scan.scan_directory(tmp_path, ".py")
    assert count.other_chars == 50 * 450 * 22 and count.files_counted == 50
    assert count.tokens == 50 * int(450 * 22 / 4)


def test_scan_and_count_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        scan.scan_directory(tmp_path / "absent")
    (tmp_path / "f.txt").write_text("x", encoding="utf-8")
    with pytest.raises(UserError, match="is not a directory"):
        scan.scan_directory(tmp_path / "f.txt")
    with pytest.raises(UserError, match="not found"):
        tk.count_file(tmp_path / "absent.txt")
    with pytest.raises(UserError, match="is a directory"):
        tk.count_file(tmp_path)
    (tmp_path / "bin").write_bytes(b"\x00\x01")
    with pytest.raises(UserError, match="binary"):
        tk.count_file(tmp_path / "bin")


# -- /tokenize on a loopback server ------------------------------------------------------------


class _Tokenize(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/tokenize":
            self.send_response(404)
            self.end_headers()
            return
        words = body["prompt"].split()
        payload = json.dumps({"count": len(words), "max_model_len": 4096, "tokens": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tokenize_url() -> Iterator[str]:
    with serve_threaded(_Tokenize) as url:
        yield url


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_count_via_endpoint(tokenize_url: str) -> None:
    count = ex.count_with_endpoint(tokenize_url + "/", "one two three")
    assert count.tokens == 3 and count.exact and count.method == "exact (/tokenize)"
    assert count.max_model_len == 4096


def test_scan_with_endpoint_counts_each_file(tokenize_url: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a b c", encoding="utf-8")
    (tmp_path / "b.txt").write_text("d e", encoding="utf-8")
    counter = ex.EndpointTokenizer(tokenize_url)
    try:
        count = scan.scan_directory(tmp_path, exact=counter, method="exact (/tokenize)")
    finally:
        counter.close()
    assert count.tokens == 5 and count.files_counted == 2 and count.exact


def test_endpoint_down_or_wrong_is_a_runtime_failure(tokenize_url: str) -> None:
    with pytest.raises(RuntimeFailure, match="unreachable"):
        ex.count_with_endpoint(f"http://127.0.0.1:{_closed_port()}", "x")
    with pytest.raises(RuntimeFailure, match="HTTP 404"):
        ex.count_with_endpoint(tokenize_url + "/v1", "x")


def _tiny_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def test_count_via_tokenizer(tmp_path: Path) -> None:
    path = _tiny_tokenizer(tmp_path / "tokenizer.json")
    count = ex.count_with_tokenizer(path, "hello world hello!")
    assert count.tokens == 4 and count.method == "exact (tokenizer.json)"
    assert isinstance(count.chars_per_token, NA)
    assert ex.count_with_tokenizer(tmp_path, "hello").tokens == 1  # a folder holding one
    with pytest.raises(UserError, match="not found"):
        ex.load_tokenizer(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="cannot load tokenizer"):
        ex.load_tokenizer(tmp_path / "bad.json")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_and_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x", encoding="utf-8")
    secret.chmod(0)
    with pytest.raises(UserError, match="cannot read"):
        tk.count_file(secret)
    assert dict(scan.scan_directory(tmp_path).skipped) == {"unreadable": 1}


def test_scan_directory_counts_an_empty_file_and_one_larger_than_a_read(tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_bytes(b"")
    big = "長" * 10 + "x" * (tk.CHUNK_BYTES + 7)  # more than one read's worth
    (tmp_path / "big.txt").write_text(big, encoding="utf-8")
    count = scan.scan_directory(tmp_path)
    assert count.files_counted == 2 and count.files_skipped == 0
    assert (count.cjk_chars, count.other_chars) == (10, tk.CHUNK_BYTES + 7)
