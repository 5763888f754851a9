"""``dfa sandbox setup`` applied, as root: the fallback sandbox's uid reaches a Python environment in a private
home and nothing beside it, and ``dfa sandbox undo`` leaves every ACL as it was. The slow test is the
instructor's path on a stock machine without bubblewrap: refused, set up, graded, undone.

Both need root and setfacl (the acl package); without them they skip, saying which (a failure where CI sets
DFA_REQUIRE_SANDBOX=1)."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from common.grading.sandbox import acl, fallback


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the fallback sandbox (and dfa sandbox setup) run as root only"
    if shutil.which("setfacl") is None:
        return "setfacl is not installed (apt-get install acl)"
    return None


@pytest.fixture
def as_root():
    problem = _missing()
    if problem:
        if os.environ.get("DFA_REQUIRE_SANDBOX"):
            pytest.fail(problem)
        pytest.skip(problem)


def _acls(paths: list[Path], recursive: bool = True) -> str:
    """Every ACL and mode of ``paths`` (and under them), as getfacl prints them."""
    if not paths:
        return ""
    return subprocess.run(["getfacl", *(["-R"] if recursive else []), "-p", "--absolute-names", *map(str, paths)],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def _acls_of(changes: list[acl.Change]) -> str:
    flat, trees = [Path(c.path) for c in changes if not c.recursive], [Path(c.path) for c in changes if c.recursive]
    return _acls(flat, recursive=False) + _acls(trees)


def _group_exists() -> bool:
    try:
        grp.getgrnam(acl.GROUP)
        return True
    except KeyError:
        return False


def _opened_by_a_sandbox_uid(paths: list[Path]) -> list[Path]:
    """Which of ``paths`` a fallback uid can read (a file) or list (a folder): cat and ls run as that uid, not
    Python, which this machine's uid may not be able to run (why setup exists)."""
    slot = fallback.claim()
    try:
        return [path for path in paths if subprocess.run(
            fallback.enter_prefix(slot.uid, False) + ["/bin/ls" if path.is_dir() else "/bin/cat", str(path)],
            capture_output=True, cwd="/").returncode == 0]  # fmt: skip
    finally:
        slot.clean()
        slot.release()


def test_setup_lets_the_sandbox_uid_read_the_environment_and_nothing_beside_it_and_undo_restores(as_root, tmp_path):
    top = Path(tempfile.mkdtemp(prefix="dfa-acl-setup-"))  # its ancestors are open: only this tree changes
    try:
        os.chmod(top, 0o755)
        home, env = top / "home", top / "home" / "tools" / "env"
        env.mkdir(parents=True)
        (env / "site.py").write_text("")
        (home / ".cache").mkdir()
        (home / ".cache" / "token").write_text("secret")
        (home / "notes.txt").write_text("secret")
        (home / "tools" / "other").mkdir()
        os.chmod(home, 0o700)
        os.chmod(home / "tools", 0o750)
        os.chmod(env / "site.py", 0o600)  # closed inside too: read recursively, for the group only
        before, had_group = _acls([top]), _group_exists()
        state = tmp_path / "state"
        try:  # undo in any case: no failed assertion leaves the machine changed
            lines = acl.setup([env], folder=state)
            wanted = [env / "site.py", home / ".cache", home / ".cache" / "token", home / "notes.txt",
                      home / "tools" / "other", home / "tools"]  # fmt: skip
            opened = _opened_by_a_sandbox_uid(wanted)
            group_bits = os.stat(env / "site.py").st_mode & 0o077
            again = acl.setup([env], folder=state)
            state_mode = state.stat().st_mode & 0o777
        finally:
            undone = acl.undo(folder=state)
        assert f"setfacl -m g:{acl.GROUP}:x {home}   # enter, towards {env}" in lines
        assert any(line.startswith(f"setfacl -n -m g:{acl.GROUP}:- {home / '.cache'}") for line in lines)
        assert lines[-1] == f"  rm {state / acl.RECORD_NAME} {state / acl.BACKUP_NAME}"
        assert opened == [env / "site.py"]
        assert group_bits == 0o040  # its mode shows the mask; "other" stays ---
        assert again[0].startswith("nothing to change") and state_mode == 0o700  # a second run adds nothing
        assert undone[0].startswith(f"setfacl --restore={state / acl.BACKUP_NAME}")
        assert _acls([top]) == before
        assert _group_exists() == had_group
        assert not state.exists()
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)


def _hide_bwrap(folder: Path) -> str:
    """A PATH like this one, without bwrap: a link to every other command on it."""
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        for tool in Path(entry).glob("*") if Path(entry).is_dir() else []:
            if tool.name != "bwrap" and not (folder / tool.name).exists() and os.access(tool, os.X_OK):
                (folder / tool.name).symlink_to(tool)
    return f"{Path(sys.executable).parent}{os.pathsep}{folder}"


@pytest.mark.slow
def test_without_bubblewrap_a_python_in_a_private_home_grades_after_setup(as_root, tmp_path):
    from fixtures.grading_support import AUTOGRADED_POINTS, FIXTURE_COURSE, copy_course, release_nb, right_answers
    from fixtures.grading_support import submit as submit_nb

    from common.grading.authoring.release import release
    from common.grading.sandbox.bwrap import package_dir

    envs = acl.environment_dirs()
    closed = acl.closed_ancestors(envs)
    if not closed:
        pytest.skip(f"this Python ({', '.join(map(str, envs))}) is not in a private home: nothing to set up")
    # the package alone, outside the checkout (whose course folders the fallback would refuse as readable)
    pkg = tmp_path / "pkg"
    shutil.copytree(package_dir(), pkg / "common", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PATH": _hide_bwrap(tmp_path / "bin"), "PYTHONPATH": str(pkg),
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip
    env.pop("DFA_SANDBOX", None)
    course = copy_course(FIXTURE_COURSE, tmp_path / "courses")
    release([course])
    submit_nb(course, "honest", right_answers(course))
    submit_nb(course, "blank", release_nb(course))

    def dfa(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "common.cli", *argv], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=900)  # fmt: skip

    grade = ("autograde", str(course.root), "lab1", "--workers", "2", "--timeout", "60")
    if not fallback.sandbox_groups():  # not set up on this machine yet: the refusal names the command
        refused = dfa(*grade)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "bubblewrap unavailable (the bwrap command is not installed)" in refused.stderr
        assert f"other users cannot enter {closed[0]}" in refused.stderr and "dfa sandbox setup" in refused.stderr
    changes = acl.plan(envs)  # what setup will touch (fewer where a previous setup did it already)
    before, had_group = _acls_of(changes), _group_exists()
    setup = dfa("sandbox", "setup")
    try:
        assert setup.returncode == 0, setup.stderr
        graded = dfa(*grade)
        assert graded.returncode == 0, graded.stdout + graded.stderr
        assert "sandbox: fallback: bubblewrap unavailable (the bwrap command is not installed)" in graded.stdout
        scores = {line.split()[0]: float(line.split()[1]) for line in graded.stdout.splitlines()
                  if line.split()[:1] in (["honest"], ["blank"])}  # fmt: skip
        assert scores == {"honest": AUTOGRADED_POINTS, "blank": 0.0}, graded.stdout
    finally:
        undo = dfa("sandbox", "undo")
    assert undo.returncode == 0, undo.stderr
    assert _acls_of(changes) == before
    assert _group_exists() == had_group
