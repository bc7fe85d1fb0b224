"""The spare file a full disk gives up: taken again after a commit once this process gave it up."""

from __future__ import annotations

import os
from pathlib import Path

from chatgate.store.sqlite.space import SPARE_BYTES, SpareSpace


def test_a_spare_given_up_is_taken_again_after_the_next_commit(tmp_path: Path) -> None:
    space = SpareSpace(str(tmp_path / "chatgate.db"))
    assert space.reserve()
    assert os.path.getsize(space.path) == SPARE_BYTES
    assert space.release()  # a full disk: the writer deletes it to checkpoint
    assert not os.path.exists(space.path)
    space.retake()  # what the writer calls after every commit
    assert os.path.getsize(space.path) == SPARE_BYTES


def test_a_spare_deleted_by_hand_is_taken_again_by_the_readiness_probe_not_a_commit(tmp_path: Path) -> None:
    space = SpareSpace(str(tmp_path / "chatgate.db"))
    assert space.reserve()
    os.unlink(space.path)
    space.retake()  # no stat after each commit while this process holds the spare
    assert not os.path.exists(space.path)
    assert space.reserve()  # /readyz's write probe and the writer's start look at the disk
    assert os.path.getsize(space.path) == SPARE_BYTES
