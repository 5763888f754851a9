"""The ACL plan of ``dfa sandbox setup`` (common/grading/sandbox/acl.py), on a tree made here: which folders
the fallback sandbox's group may enter, what it must not see next to them, and the one-line refusals.
Nothing is changed on disk; tests/test_grading_fallback_setup.py applies a plan as root."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from common.errors import DFAError
from common.grading.sandbox import acl


@pytest.fixture
def open_tmp():
    """A folder every user may enter, in the temporary folder (pytest's tmp_path lies in a 0700 folder, from
    which down everything would count as newly reachable)."""
    folder = Path(tempfile.mkdtemp(prefix="dfa-acl-plan-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def _home(tmp_path: Path) -> tuple[Path, Path]:
    """``home`` (0700) / ``tools`` (0750, closed) / ``env`` (open), with things around them."""
    home = tmp_path / "home"
    env = home / "tools" / "env"
    (env / "lib").mkdir(parents=True)
    (env / "lib" / "site.py").write_text("")
    (home / ".cache").mkdir()
    (home / ".cache" / "token").write_text("secret")
    (home / ".bashrc").write_text("")
    (home / "private").write_text("")
    (home / "tools" / "other-python").mkdir()
    (home / "link").symlink_to("/etc")
    for path, mode in [(home, 0o700), (home / "tools", 0o750), (env, 0o755), (home / ".cache", 0o755),
                       (home / ".bashrc", 0o644), (home / "private", 0o600), (home / "tools" / "other-python", 0o755),
                       (env / "lib", 0o755), (env / "lib" / "site.py", 0o644)]:  # fmt: skip
        os.chmod(path, mode)
    return home, env


def _inside(changes: list[acl.Change], root: Path) -> dict[str, str]:
    return {str(Path(c.path).relative_to(root)): c.perm for c in changes if Path(c.path).is_relative_to(root)}


def test_the_plan_opens_the_way_to_the_environment_and_hides_what_lies_beside_it(open_tmp):
    tmp_path = open_tmp
    home, env = _home(tmp_path)
    changes = acl.plan([env])
    assert _inside(changes, tmp_path) == {
        "home": "x",  # enter only: its names cannot be listed
        "home/.bashrc": "-",  # other users could read these once inside: denied to the group
        "home/.cache": "-",
        "home/tools": "x",
        "home/tools/other-python": "-",
    }  # not: home/private (closed to others anyway), home/link (a link grants nothing), the open env itself
    for change in changes:  # above tmp_path: its closed ancestors entered, what others could open beside them hidden
        if not Path(change.path).is_relative_to(tmp_path):
            assert change.perm == ("x" if tmp_path.is_relative_to(change.path) else "-"), change
    assert all(c.command()[:1] == ["setfacl"] and "g:dfa-sandbox:" in " ".join(c.command()) for c in changes)
    assert acl.closed_ancestors([env])[-2:] == [home, home / "tools"]


def test_a_closed_environment_tree_is_read_recursively_and_an_open_way_needs_nothing(open_tmp):
    tmp_path = open_tmp
    home, env = _home(tmp_path)
    os.chmod(env / "lib" / "site.py", 0o600)
    change = next(c for c in acl.plan([env]) if c.path == str(env))
    assert change.perm == "rX" and change.command() == ["setfacl", "-R", "-m", "g:dfa-sandbox:rX", str(env)]
    for folder in (home, home / "tools"):
        os.chmod(folder, 0o755)
    os.chmod(env / "lib" / "site.py", 0o644)
    assert _inside(acl.plan([env]), tmp_path) == {}


def test_deny_entries_keep_the_mask_and_grants_do_not_recurse_into_anything_else():
    assert acl.Change("/a", "-", "").command() == ["setfacl", "-n", "-m", "g:dfa-sandbox:-", "/a"]
    assert acl.Change("/a", "x", "").command() == ["setfacl", "-m", "g:dfa-sandbox:x", "/a"]


def test_setup_refuses_in_one_line_without_root_or_without_setfacl(tmp_path, monkeypatch):
    _, env = _home(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(DFAError, match=r"only root can do .*run `sudo .* -m common.cli sandbox setup`$"):
        acl.setup([env], folder=tmp_path / "state")
    with pytest.raises(DFAError, match=r"run `sudo .* -m common.cli sandbox undo`$"):
        acl.undo(folder=tmp_path / "state")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no setfacl on it
    with pytest.raises(DFAError, match=r"^setfacl is not installed: install the acl package \(apt-get install acl\)"):
        acl.setup([env], folder=tmp_path / "state")
    assert not (tmp_path / "state").exists()
    lines = acl.setup([env], dry_run=True)  # a dry run needs neither
    assert any(line.startswith(f"setfacl -m g:dfa-sandbox:x {tmp_path / 'home'}   #") for line in lines)
