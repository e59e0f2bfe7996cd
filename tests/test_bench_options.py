"""The benchmarks refuse, in one line and before running anything, options
they cannot measure with."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import same_lines  # noqa: E402

pytestmark = pytest.mark.graph_free


@pytest.mark.parametrize("kill_after", ["0", "1"])
def test_same_lines_refuses_a_kill_before_the_first_checkpoint(kill_after, capsys, monkeypatch):
    # --kill-after 1 killed the run as it printed its first validation line,
    # before any checkpoint was written: after three runs the bench reported
    # the resumed one as failed ("no such checkpoint"), status 1, as if
    # resuming were broken
    ran = []
    monkeypatch.setattr(same_lines, "runs", lambda *arguments: ran.append(arguments))
    with pytest.raises(SystemExit) as stopped:
        same_lines.main(["--dataset", "digits", "--epochs", "3", "--kill-after", kill_after])
    assert stopped.value.code == 2 and ran == []
    assert f"--kill-after {kill_after}: give 2 or more" in capsys.readouterr().err
