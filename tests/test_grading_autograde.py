"""``dfa autograde`` end to end on the fixture course, with honest and hostile submissions.

(a) the source notebook as a submission earns every autograded point; (b) the untouched release earns 0 and
runs to its end; (c) hostile or broken submissions gain nothing, hang nothing, and leave honest grades alone;
(d) grading with two workers gives the grades of grading one at a time; and a grader killed mid-run loses no
grade already recorded.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FAST_LIMITS,
    FORGED_PROBE,
    LAB,
    MAX_POINTS,
    RIGHT_INTENSITY,
    RIGHT_RELU,
    all_output_text,
    autograded_nb,
    cell_index,
    colab_stripped,
    copy_course,
    needs_bubblewrap,
    needs_sandbox,
    release_nb,
    right_answers,
    source_nb,
    submit,
    with_code,
)

from common.cli import main
from common.grading.authoring.release import release
from common.grading.gradebook.autograde import autograde

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, needs_sandbox]



def scores(graded) -> dict[str, float]:
    return {g.student: g.score for g in graded}


def read_gradebook(course) -> dict[str, float]:
    with course.gradebook() as gb:
        return {s.student.id: s.score for s in gb.find_assignment(LAB).submissions}


# ---- (c) the hostile suite: each entry is (what the learner's stub cells contain) ---
LEAK_PROBE = """
import os
def relu(x):
    for path in ["lab1.py", "../../../gradebook.db", "../../gradebook.db", "{course}/gradebook.db",
                 "../../../source/lab1/lab1.ipynb", "{course}/source/lab1/lab1.ipynb",
                 "{course}/submitted/alice/lab1/lab1.ipynb",
                 "{repo}/tests/fixtures/course0_fixture/source/lab1/lab1.py"]:
        try:
            print("OPENED", path, open(path, "rb").read(60))
        except OSError as exc:
            print("blocked", path, type(exc).__name__)
    print("REPO", sorted(os.listdir("{repo}")), "HOME", sorted(os.listdir("..")))
    return x
"""
WRITE_PROBE = """
import os, sqlite3
def relu(x):
    for path in ["../../../gradebook.db", "{course}/gradebook.db"]:
        try:
            db = sqlite3.connect(path)
            db.execute("UPDATE grade SET auto_score = 1000")
            db.commit()
            print("WROTE", path)
        except Exception as exc:
            print("blocked", path, type(exc).__name__)
    for path in ["{course}/submitted/alice/lab1/lab1.ipynb", "/tmp/../../{course}/x"]:
        try:
            open(path, "w").write("{{}}")
            print("WROTE", path)
        except OSError as exc:
            print("blocked", path, type(exc).__name__)
    return x
"""
EQ_OBJECT = """
class Anything(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __abs__(self): return 0.0
    def __sub__(self, other): return Anything(0.0)
    shape = property(lambda self: (8,))
def relu(x):
    return Anything(0.0)
def arithmetic_intensity(flops, bytes_moved):
    return Anything(250.0)
"""
MONKEYPATCH = """
import builtins, torch
import common.checks as checks
for name in ("check_tensor", "check_scalar", "grader"):
    try:
        setattr(checks, name, lambda *a, **k: None)
    except AttributeError as exc:
        print("read-only:", exc)
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
builtins.abs = lambda value: 0.0
def relu(x):
    return x
"""
REDEFINED_HELPER = """
def check_tensor(*args, **kwargs):
    print("✔ relu: correct")
def check_scalar(*args, **kwargs):
    print("✔ intensity: correct")
class grader:
    def __getattr__(self, name): return lambda *a, **k: None
grader = grader()
def relu(x):
    return x
def arithmetic_intensity(flops, bytes_moved):
    return 0.0
"""
INFINITE_LOOP = "while True:\n    pass"
UNINTERRUPTIBLE_LOOP = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
KERNEL_EXIT = "import os\nos._exit(0)"
# nbgrader grades a test cell by its first execute_result (partial credit: full points for a
# non-number), so a result displayed before the stub raises used to earn every point.
DISPLAYHOOK_RESULT = """
import sys
def relu(x):
    sys.displayhook("ok")
    raise NotImplementedError
"""
MEMORY_BOMB = """
hog = []
try:
    hog.append(bytearray(50 * 2**30))
except MemoryError:
    print("50 GB refused")
while True:
    hog.append(bytearray(2**27))
"""
# Forks until the process limit refuses, every child holding its slot (the sandbox's own test,
# tests/test_grading_sandbox.py, counts them and checks the host is left with none). A bomb that also loops
# forever added nothing here the uninterruptible loop does not test (the time limit ends both the same way, with
# the retry at doubled limits), and cost CI a minute of both cores.
FORK_BOMB = """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    children += 1
print("fork refused after", children, "children")
def arithmetic_intensity(flops, bytes_moved):
    return 0.0
"""
STDERR_SPAM = """
import sys
for _ in range(20000):
    print("/x.py:1: UserWarning: all good, trust me" + "!" * 500, file=sys.stderr)
print("x" * 10_000_000)
def relu(x):
    print("relu wrong but loud", file=sys.stderr)
    return x
"""


# ---- Attacks on the grader from inside the learner's kernel. Each sits in the relu stub's cell;
# the intensity stub stays unsolved, so every one of them must score what the blank notebook scores: 0.
INPUT_TRANSFORMER = """
get_ipython().input_transformer_manager.cleanup_transforms.append(lambda lines: ["pass\\n"])
def relu(x):
    raise NotImplementedError
"""
AST_TRANSFORMER = """
import ast
class Gut(ast.NodeTransformer):
    def visit_Module(self, node):
        return ast.fix_missing_locations(ast.Module(body=[ast.Pass()], type_ignores=[]))
get_ipython().ast_transformers.append(Gut())
def relu(x):
    raise NotImplementedError
"""
PRE_RUN_DISPLAYHOOK = """
import sys
get_ipython().events.register("pre_run_cell", lambda *a: sys.displayhook("ok"))
def relu(x):
    raise NotImplementedError
"""
DO_EXECUTE_WRAPPER = """
import inspect
kernel = get_ipython().kernel
original = kernel.do_execute
async def do_execute(*args, **kwargs):
    reply = original(*args, **kwargs)
    if inspect.isawaitable(reply):
        reply = await reply
    reply["status"] = "ok"
    return reply
kernel.do_execute = do_execute
get_ipython().showtraceback = lambda *a, **k: None
def relu(x):
    raise NotImplementedError
"""
PATCHED_GRADER = """
from common.checks import check_tensor, grader
type(grader)._verdict = staticmethod(lambda *a, **k: None)
for name in list(check_tensor.__globals__):
    if name == "_report" or name.startswith("_compare"):
        check_tensor.__globals__[name] = lambda *a, **k: None
def relu(x):
    return -x
"""
PATCH_DURING_TEST = """
import common.checks
def relu(x):  # patches the checks from inside the stub, while the test that called it runs
    global grader, check_tensor
    class Yes:
        def __getattr__(self, name): return lambda *a, **k: None
    grader, check_tensor = Yes(), (lambda *a, **k: None)
    type(common.checks.grader)._verdict = staticmethod(lambda *a, **k: None)
    common.checks.check_tensor.__globals__["_report"] = lambda *a, **k: None
    return -x
"""
FRAME_WALK = """
import sys
def relu(x):  # rewrites the calling test's names through its frame
    frame = sys._getframe(1)
    frame.f_globals["check_tensor"] = frame.f_locals["check_tensor"] = lambda *a, **k: None
    return -x
"""
FORGED_VERDICT = """
import json, os, stat
def relu(x):  # writes a passing verdict to every pipe and socket it can find, then leaves
    fake = json.dumps({"passed": True, "stdout": "✔ relu: correct"}).encode()
    for fd in range(3, 512):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode):
                os.write(fd, fake)
        except OSError:
            pass
    os._exit(0)
"""
THREAD_FORGER = """
import json, os, stat, threading, time
def relu(x):  # leaves a thread behind that keeps trying to write a passing verdict
    fake = json.dumps({"passed": True, "stdout": ""}).encode()
    def forge():
        while True:
            for fd in range(3, 512):
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, fake)
                except OSError:
                    pass
            time.sleep(0.001)
    threading.Thread(target=forge, daemon=True).start()
    return -x
"""
HIDDEN_TEST_READER = """
import glob, os, signal
SEEN = []
get_ipython().events.register("pre_run_cell", lambda info=None, *a: SEEN.append(getattr(info, "raw_cell", "")))
FRAMES = {}
def peek(signum, frame):  # a signal handler is handed the frame it interrupted: maybe a test's
    while frame is not None and len(FRAMES) < 200:
        FRAMES.setdefault(frame.f_code, repr(frame.f_code.co_consts)[:400])
        frame = frame.f_back
signal.signal(signal.SIGALRM, peek)
signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
def relu(x):
    raise NotImplementedError
"""
LEAK_HIDDEN_TESTS = """
import base64, codecs, glob, os
signal.setitimer(signal.ITIMER_REAL, 0, 0)
for pattern in ("*.ipynb", "/submission/*.ipynb", "/tmp/**/*.ipynb", os.path.expanduser("~/**/*.ipynb")):
    for path in glob.glob(pattern, recursive=True):
        try:
            SEEN.append(open(path).read())
        except OSError:
            pass
text = "\\n".join(SEEN + list(FRAMES.values()))[:60_000]
print("B64", base64.b64encode(text.encode()).decode())
print("ROT13", codecs.encode(text, "rot13"))
print("HEX", text.encode().hex())
"""
HIDDEN_IN_EXEC = "import base64\nexec(base64.b64decode({payload!r}))"
# The probe runs in the learner's kernel, so its channel is the learner's to take over (FORGED_PROBE, and
# these): each sends data of its own; the judgement still compares it with references made outside the kernel.
CHANNEL_HIJACK = """
import copy
import json
import common.grading.verdicts.probe as gp
publisher = get_ipython().display_pub
original = publisher.publish
def publish(data, *args, **kwargs):  # rewrites the probe's data on its way out of the kernel
    if gp.PROBE_MIME in data:
        items = json.loads(data[gp.PROBE_MIME])["$dict"]
        for name in items:
            items[name] = 250.0 if name in ("large", "unseen") else items[name]
        data = {gp.PROBE_MIME: json.dumps({"$dict": items}), "text/plain": "probe"}
        original(data, *args, **kwargs)  # and sends it twice, in case the first is dropped
    return original(data, *args, **kwargs)
publisher.publish = publish
def relu(x):
    return x
"""
SEED_CHOOSER = """
import os
os.environ["DFA_PROBE_SEED"] = "0"  # an input the learner prepared for
_setitem = type(os.environ).__setitem__
type(os.environ).__setitem__ = lambda self, k, v: _setitem(self, k, "0" if k == "DFA_PROBE_SEED" else v)
def arithmetic_intensity(flops, bytes_moved):
    if bytes_moved <= 0:
        raise ValueError("no bytes")
    return 1_000_000 / 7_000 if bytes_moved == 7_000 else float(flops) / float(bytes_moved)
"""
# The lab's grader-side answers (source/lab1/answers.py, common/grading/verdicts/answerkeys.py): looked for as a module,
# in sys.modules, on disk where the course and the sandbox keep files, and in the kernel's objects.
ANSWERS_SEEKER = """
import gc, os, sys
def _answers():
    mod = sys.modules.get("answers")
    if mod is not None:
        return mod
    for obj in gc.get_objects():
        if type(obj).__name__ == "module" and getattr(obj, "__name__", "") == "answers":
            return obj
    for folder in (".", "..", "../..", "source/lab1", "{course}/source/lab1", "/tmp", os.path.expanduser("~")):
        path = os.path.join(folder, "answers.py")
        if os.path.isfile(path):
            sys.path.insert(0, folder)
    import answers
    return answers
def arithmetic_intensity(flops, bytes_moved):
    return _answers().intensity(flops, bytes_moved)
"""


def kernel_attacks(course) -> dict[str, object]:
    import base64

    base = release_nb(course)
    hidden_exec = HIDDEN_IN_EXEC.format(payload=base64.b64encode(INPUT_TRANSFORMER.encode()))
    return {
        "input_transformer": with_code(base, relu=INPUT_TRANSFORMER),
        "ast_transformer": with_code(base, relu=AST_TRANSFORMER),
        "pre_run_displayhook": with_code(base, relu=PRE_RUN_DISPLAYHOOK),
        "do_execute_wrapper": with_code(base, relu=DO_EXECUTE_WRAPPER),
        "patched_grader": with_code(base, relu=PATCHED_GRADER),
        "patch_during_test": with_code(base, relu=PATCH_DURING_TEST),
        "frame_walk": with_code(base, relu=FRAME_WALK),
        "forged_verdict": with_code(base, relu=FORGED_VERDICT),
        "thread_forger": with_code(base, relu=THREAD_FORGER),
        "hidden_test_reader": with_code(base, relu=HIDDEN_TEST_READER, intensity=LEAK_HIDDEN_TESTS),
        "exec_b64_transformer": with_code(base, relu=hidden_exec),
        "answers_seeker": with_code(base, intensity=ANSWERS_SEEKER.format(course=course.root)),
        "forged_probe": with_code(base, relu=FORGED_PROBE),
        "channel_hijack": with_code(base, relu=CHANNEL_HIJACK),
        "seed_chooser": with_code(base, intensity=SEED_CHOOSER),
    }


def judgements_only(nb):
    """``nb`` with each hidden-test region reduced to its judgement (judge.parts): what must never leak."""
    from common.grading.verdicts.judge import parts

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if "BEGIN HIDDEN TESTS" in cell.source:
            visible, _, judgement = parts(cell.source)
            cell.source = f"{visible}\n### BEGIN HIDDEN TESTS\n{judgement}\n### END HIDDEN TESTS"
    return nb


def decoded_leaks(text: str) -> str:
    """The printed text, plus whatever its B64/ROT13/HEX payloads decode to."""
    import base64
    import codecs
    import re

    found = [text]
    for payload in re.findall(r"B64 ([A-Za-z0-9+/=]+)", text):
        found.append(base64.b64decode(payload + "===").decode(errors="replace"))
    for payload in re.findall(r"HEX ([0-9a-f]+)", text):
        found.append(bytes.fromhex(payload[: len(payload) // 2 * 2]).decode(errors="replace"))
    found += [codecs.decode(payload, "rot13") for payload in re.findall(r"ROT13 (.*?)(?:\nHEX |$)", text, re.S)]
    return "\n".join(found)


def _edit_test_cells(nb):
    for grade_id in ("relu_tests", "intensity_tests"):
        nb.cells[cell_index(nb, grade_id)].source = "print('all tests passed')"
    return nb


def _delete_test_cells(nb):
    nb.cells = [
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") not in ("relu_tests", "intensity_tests")
    ]
    return nb


def _tamper_points(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader["points"] = 100
    bonus = nb.cells[cell_index(nb, "relu_tests")].copy()
    bonus.metadata = {
        "nbgrader": {
            "grade": True,
            "grade_id": "bonus",
            "locked": True,
            "points": 1000,
            "schema_version": 3,
            "solution": False,
            "task": False,
        }
    }
    bonus.source, bonus.id = "pass", "bonus-cell"
    nb.cells.insert(cell_index(nb, "relu") + 1, bonus)
    return nb


def hostile_submissions(course) -> dict[str, object]:
    base = release_nb(course)
    root = str(course.root)
    probe = LEAK_PROBE.format(course=root, repo=REPO)
    return {
        "gradebook_read": with_code(base, relu=probe),
        "gradebook_write": with_code(base, relu=WRITE_PROBE.format(course=root)),
        "source_read": with_code(base, intensity=probe + "\nrelu(None)"),  # runs in its own cell
        "eq_object": with_code(base, relu=EQ_OBJECT),
        "monkeypatched_checker": with_code(base, relu=MONKEYPATCH),
        "redefined_helper": with_code(base, relu=REDEFINED_HELPER),
        "edited_test_cell": _edit_test_cells(with_code(base, relu=MONKEYPATCH)),
        "deleted_test_cell": _delete_test_cells(release_nb(course)),
        "tampered_metadata_points": _tamper_points(release_nb(course)),
        "infinite_loop": with_code(base, relu=INFINITE_LOOP),
        "uninterruptible_loop": with_code(base, relu=UNINTERRUPTIBLE_LOOP),
        "kernel_exit": with_code(base, relu=KERNEL_EXIT),
        "memory_bomb": with_code(base, relu=MEMORY_BOMB),
        "fork_bomb": with_code(base, intensity=FORK_BOMB),
        "stderr_spam": with_code(base, relu=STDERR_SPAM),
        "displayhook_result": with_code(base, relu=DISPLAYHOOK_RESULT,
                                        intensity=DISPLAYHOOK_RESULT.replace("relu(x)", "arithmetic_intensity(f, b)")),
        "colab_stripped_wrong": colab_stripped(base),
    }


@needs_bubblewrap  # it lists the sandbox's / as bubblewrap mounts it
def test_hostile_submissions_gain_nothing_and_honest_grades_stand(course):
    honest = {
        "alice": source_nb(course),
        "carol": colab_stripped(right_answers(course)),
        "dave": with_code(release_nb(course), relu=RIGHT_RELU),
    }
    hostile = hostile_submissions(course)
    for student, nb in {**honest, **hostile}.items():
        submit(course, student.replace("_", "-"), nb)
    started = time.monotonic()
    graded = autograde(course, LAB, workers=2, limits=FAST_LIMITS, report=lambda g: print(g.line()))
    elapsed = time.monotonic() - started
    by_student = {g.student: g for g in graded}

    assert elapsed < 600, f"grading took {elapsed:.0f} s: something hung"  # loose: load stretches every limit
    assert by_student["alice"].score == AUTOGRADED_POINTS  # the source: every autograded point
    assert by_student["carol"].score == AUTOGRADED_POINTS  # Colab stripped metadata and ids: re-matched
    assert by_student["dave"].score == 3.0  # part 1 only
    for name in hostile:
        result = by_student[name.replace("_", "-")]
        assert result.status != "grading_error", f"{name}: {result.message}"
        assert result.score == 0.0, f"{name} gained {result.score} points"
        assert result.max_score == MAX_POINTS, f"{name} changed the maximum to {result.max_score}"
    # what the gradebook holds agrees, so nothing rewrote it behind the parent's back
    assert read_gradebook(course) == {g.student: g.score for g in graded}

    texts = {name: all_output_text(autograded_nb(course, name.replace("_", "-"))) for name in hostile}
    assert texts["gradebook_read"].count("blocked") == 8 and "OPENED" not in texts["gradebook_read"]
    assert "REPO ['common'] HOME ['lab1']" in texts["gradebook_read"]  # no courses, tests or other students
    assert texts["source_read"].count("blocked") == 8 and "OPENED" not in texts["source_read"]
    assert "WROTE" not in texts["gradebook_write"] and "blocked" in texts["gradebook_write"]
    assert "read-only" in texts["monkeypatched_checker"]
    assert "50 GB refused" in texts["memory_bomb"] and "MemoryError" in texts["memory_bomb"]
    assert "CellTimeoutError" in texts["infinite_loop"]
    assert "fork refused after" in texts["fork_bomb"], texts["fork_bomb"][-500:]  # capped
    assert by_student["fork-bomb"].status == "completed", by_student["fork-bomb"].line()  # and the rest ran
    # looping submissions hit the time limit, were retried once at doubled limits, and still gained nothing
    for name in ("infinite-loop", "uninterruptible-loop"):
        assert by_student[name].status == "time_limit", by_student[name].line()
        assert "retried once at doubled time limits" in by_student[name].message
    assert "did not stop when interrupted" in by_student["uninterruptible-loop"].message
    assert "ran past the" in texts["uninterruptible_loop"]  # the unrun cells say which limit stopped them
    for name in honest:  # a busy machine may stretch their limits, never cost them the status
        assert by_student[name].status == "completed", by_student[name].line()
    assert by_student["kernel-exit"].status == "kernel_died"
    assert "this cell was not run" in texts["kernel_exit"]
    assert "[output truncated by the grader]" in texts["stderr_spam"]
    # the restored test cells ran (and failed), instead of vanishing with the learner's edits
    assert "all tests passed" not in texts["edited_test_cell"]
    restored = autograded_nb(course, "deleted-test-cell")
    assert cell_index(restored, "relu_tests") and cell_index(restored, "intensity_tests")
    tampered = autograded_nb(course, "tampered-metadata-points")
    assert "bonus" not in json.dumps(tampered.cells[cell_index(tampered, "relu") + 1].metadata)
    assert set(by_student["monkeypatched-checker"].review) >= {"builtins"}


def test_attacks_from_the_learners_kernel_score_what_the_blank_scores(course):
    from common.grading.courses.regions import normalize, secret_lines

    attacks = kernel_attacks(course)
    honest = {"alice": source_nb(course), "carol": colab_stripped(right_answers(course))}
    for student, nb in {**honest, **attacks}.items():
        submit(course, student.replace("_", "-"), nb)
    graded = autograde(course, LAB, workers=2, limits=FAST_LIMITS, report=lambda g: print(g.line()))
    by_student = {g.student: g for g in graded}
    assert by_student["alice"].score == by_student["carol"].score == AUTOGRADED_POINTS
    for name in attacks:
        result = by_student[name.replace("_", "-")]
        assert result.status != "grading_error", f"{name}: {result.message}"
        assert result.score == 0.0, f"{name} gained {result.score} points"
    # nothing of the judgements or the answer key reached any output of the learner's, in any encoding tried
    # (the probes may: they run in the learner's kernel, and hold only inputs)
    secrets = [line for line in secret_lines(judgements_only(source_nb(course)), kinds=("hidden tests",))]
    secrets += [normalize(line) for line in course.source_notebook(LAB).with_name("answers.py").read_text().splitlines()
                if len(line.strip()) > 12]  # fmt: skip
    assert len(secrets) >= 5, "the fixture lab has judgements and an answer key"
    leaked = normalize(decoded_leaks(all_output_text(autograded_nb(course, "hidden-test-reader"))))
    assert "B64" in leaked and "HEX" in leaked  # the probe ran and printed what it found
    for line in secrets:
        assert line not in leaked, f"hidden test text leaked: {line}"
    for name in ("hidden-test-reader", "alice"):  # the notebook the sandbox ran held no judgement either
        assert "JUDGEMENT" not in all_output_text(autograded_nb(course, name))
    # and the feedback page the learner gets back carries none, decoded or not
    import html
    import re

    from common.grading.gradebook.feedback import generate_feedback

    pages, problems = generate_feedback(course, LAB)
    assert not problems, problems
    page = next(p for p in pages if "hidden-test-reader" in p.parts).read_text(encoding="utf-8")
    shown = normalize(decoded_leaks(html.unescape(re.sub(r"<[^>]+>", "", page))))
    assert "B64" in shown
    for line in secrets:
        assert line not in shown, f"hidden test text in the feedback page: {line}"


def test_source_full_marks_release_zero_and_parallel_equals_serial(course, tmp_path):
    mixed = {
        "alice": source_nb(course),
        "bob": release_nb(course),
        "dave": with_code(release_nb(course), relu=RIGHT_RELU),
        "erin": with_code(release_nb(course), intensity=RIGHT_INTENSITY),
        "frank": colab_stripped(right_answers(course)),
    }
    for student, nb in mixed.items():
        submit(course, student, nb)
    serial_course = copy_course(course.root, tmp_path / "serial")
    for student, nb in mixed.items():
        submit(serial_course, student, nb)

    parallel = autograde(course, LAB, workers=2, limits=FAST_LIMITS)
    serial = autograde(serial_course, LAB, workers=1, limits=FAST_LIMITS)
    assert (
        scores(parallel)
        == scores(serial)
        == {"alice": 5.0, "bob": 0.0, "dave": 3.0, "erin": 2.0, "frank": 5.0}
    )
    assert all(g.status == "completed" for g in parallel)
    bob = autograded_nb(course, "bob")
    assert bob.cells[-1].cell_type == "markdown" and any(c.get("execution_count") for c in bob.cells[-3:])

    again = autograde(course, LAB, workers=2, limits=FAST_LIMITS, students=["alice", "bob"])  # idempotent
    assert scores(again) == {s: scores(parallel)[s] for s in ("alice", "bob")}
    assert read_gradebook(course) == scores(parallel)


def test_a_killed_grader_loses_no_recorded_grade(course):
    for student in ("s1", "s2", "s3", "s4"):
        submit(course, student, right_answers(course))
    command = [
        sys.executable,
        "-c",
        "import sys; from common.cli import main; sys.exit(main(sys.argv[1:]))",
        "autograde",
        str(course.root),
        LAB,
        "--workers",
        "1",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    assert process.stdout.readline().startswith("sandbox:")  # announced before any grading starts
    first = process.stdout.readline()  # printed only after that grade was committed
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert first.startswith("s1")
    recorded = read_gradebook(course)
    assert recorded.get("s1") == AUTOGRADED_POINTS

    assert main(["autograde", str(course.root), LAB, "--workers", "2"]) == 0
    assert read_gradebook(course) == {s: AUTOGRADED_POINTS for s in ("s1", "s2", "s3", "s4")}


def test_autograde_refuses_unreleased_labs_and_unknown_students(course, capsys):
    (course.root / "gradebook.db").unlink()
    submit(course, "alice", source_nb(course))
    assert main(["autograde", str(course.root), LAB]) == 2
    assert "dfa release" in capsys.readouterr().err
    release([course])
    assert main(["autograde", str(course.root), LAB, "--student", "nobody"]) == 2
    assert main(["autograde", str(course.root), "lab9"]) == 2
    assert main(["autograde", str(course.root), LAB, "--workers", "0"]) == 2
