"""``attach_file`` reads only regular files inside the work directory: symlinks are resolved
before the check and never followed at open, and a directory, a FIFO, an empty or too large
file is refused with a reason the model reads. Real files in a tmp directory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from chatgate.agents.base import ToolCall
from chatgate.agents.tools.attach import AttachRefused, attach_request, read_file
from chatgate.agents.tools.runner import ToolArgumentError


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    return root


def test_a_file_is_copied_hashed_and_typed_by_content(work: Path, tmp_path: Path) -> None:
    data = b"%PDF-1.4 not really\n"
    (work / "sub" / "report.txt").write_bytes(data)  # the name says text, the content says PDF
    read = read_file(work, "sub/report.txt", 1000, tmp_path / "scratch")
    assert (read.sha, read.size, read.mime, read.name) == (
        hashlib.sha256(data).hexdigest(),
        len(data),
        "application/pdf",
        "report.txt",
    )
    assert Path(read.scratch).read_bytes() == data and Path(read.scratch).parent == tmp_path / "scratch"


def test_a_symlink_inside_is_read_and_one_leading_out_is_refused(work: Path, tmp_path: Path) -> None:
    (work / "real.txt").write_text("inside\n")
    os.symlink(work / "real.txt", work / "sub" / "alias.txt")
    assert read_file(work, "sub/alias.txt", 1000, tmp_path / "s").name == "real.txt"
    (tmp_path / "secret").write_text("outside\n")
    os.symlink(tmp_path / "secret", work / "leak")
    os.symlink(tmp_path, work / "sub" / "up")
    for path in ("leak", "sub/up/secret", "../secret", "/etc/hostname", "."):
        with pytest.raises(AttachRefused, match="outside the work directory"):
            read_file(work, path, 1000, tmp_path / "s")


def test_what_is_not_a_small_regular_file_is_refused(work: Path, tmp_path: Path) -> None:
    os.mkfifo(work / "pipe")
    (work / "empty").write_bytes(b"")
    (work / "big").write_bytes(b"x" * 2001)
    cases = {"sub": "not a regular file", "pipe": "not a regular file", "empty": "is empty",
             "big": "the limit is 2.0 kB", "missing": "there is no file"}  # fmt: skip
    for path, reason in cases.items():
        with pytest.raises(AttachRefused, match=reason):
            read_file(work, path, 2000, tmp_path / "s")
    scratch = tmp_path / "s"
    assert not scratch.exists() or not any(scratch.iterdir()), "a refused file leaves no scratch copy"


def test_arguments_are_checked() -> None:
    assert (
        attach_request(ToolCall("c", "attach_file", {"path": " a.png ", "caption": " hi "})).path == "a.png"
    )
    for arguments in ({}, {"path": ""}, {"path": 3}, {"path": "a\x00b"}, {"path": "a", "x": 1}):
        with pytest.raises(ToolArgumentError):
            attach_request(ToolCall("c", "attach_file", arguments))
