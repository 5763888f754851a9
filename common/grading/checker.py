"""The grading kernel's half of the trust model: test cells run in a child forked from the learner's kernel.

The learner's kernel executes their cells as any Jupyter kernel does; the grader cannot trust it (IPython's
transformers, hooks, display hook and kernel methods are all the learner's to replace). A test cell is
therefore never sent to it. Instead (runner.py is the other half):

1. ``start_kernel`` runs before IPython does, so before any learner code: it connects to the runner's
   one-time socket, imports what tests use (the modules their cells name), takes a ``Snapshot``
   (snapshot.py) and installs an audit hook (PEP 578: it cannot be removed, and no second hook may be added
   after it).
2. Where a test cell stood, the kernel runs ``sys.audit("dfa.check", i)`` and then the cell's visible part,
   whose names later cells may use. The hook forks on that event; the kernel waits for the child.
3. The child blocks signals and garbage collection (no learner finaliser or handler can run in our code),
   restores the snapshot, and only then receives the test's source, through a file descriptor passed over
   the socket (SCM_RIGHTS): the learner's kernel never holds it as text. It re-binds the names the
   instructor's locked cells imported, and executes the test with IPython out of the way.
4. While the test runs, the hook refuses what could reach the test's code or forge its verdict: frames
   (``sys._getframe``, ``tb_frame``), the garbage collector's object lists, tracing and monitoring, ctypes,
   sockets, new threads and processes, and file descriptors reopened by number or through ``/proc``.
5. Afterwards, with signals and gc still off and no other thread alive, the child receives a second
   descriptor, the write end of a pipe only the runner reads, and writes the verdict there. During the
   test that descriptor did not exist, so learner code could not write a verdict of its own.

What remains possible is named in docs/instructors.md ("What the grader trusts"): above all, a learner
who rewrites this module's work inside the kernel process itself, before the fork, at the C level.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import importlib.util
import io
import json
import os
import signal
import socket
import sys
import threading

from common.grading import answerkeys, codetrust
from common.grading import snapshot as snapshot_module

TRIGGER_EVENT = "dfa.check"
PREIMPORT = ("torch", "numpy", "common.checks", "IPython", "ipykernel.kernelapp")
# what ipykernel sets when nothing else is set; here before pyplot may first be imported (by the preimport)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# characters of a test's printed text kept: even escaped six-fold, the verdict fits a pipe's default 64 KiB
# buffer, so the child never waits on a runner that reads only after the cell (verdicts.py)
MAX_VERDICT_OUTPUT = 8 * 1024
NO_THREADS_EXIT = 3  # the child's exit status when learner threads outlived the test (no verdict sent)
REFUSED_EVENTS = frozenset(
    {
        "sys._current_frames", "sys.settrace", "sys.setprofile",
        "sys.addaudithook", "sys.monitoring.register_callback", "gc.get_objects", "gc.get_referrers",
        "gc.get_referents", "socket.__new__", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn",
        "os.spawn", "os.system", "subprocess.Popen", "pty.spawn", "_thread.start_new_thread",
        "_thread.start_joinable_thread", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle",
        "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.call_function", "ctypes.addressof",
        "ctypes.string_at", "ctypes.wstring_at", "os.chdir",
    }
)  # fmt: skip
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
# Allowed only when the code asking is genuine library code (codetrust.py): torch, typing and dataclasses
# read frames for module names and stack traces; a learner's function may not.
ASKER_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename", "object.__setattr__", "object.__delattr__"})
PROC_PARTS = ("/fd", "/mem", "/map", "/environ", "/task", "/root", "/cwd")


def preimport(names=()) -> None:
    """Import what tests use before the snapshot, so the snapshot covers it: torch, numpy, the checks, and
    the modules the lab's test and instructor cells import (``names``, testcells.imported_modules), with
    whatever those import in turn. A module that fails to import is left to the learner's cells."""
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    for name in (*PREIMPORT, *names):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (an optional library, or a module that needs a GPU)
            pass
    try:  # tqdm's monitor thread would outlive a test, and a test with a thread left running sends no verdict
        import tqdm.std

        tqdm.std.tqdm.monitor_interval = 0
    except ImportError:
        pass


def install(agent: socket.socket, modules=()) -> None:
    """Snapshot, then hook: from here on ``dfa.check`` forks a checked test (see the module docstring)."""
    preimport(modules)
    snap = snapshot_module.Snapshot()
    # Every name the child uses before the snapshot is back, or after the test ran, is bound here: learner
    # code may have rebound module globals and builtins by then, but not the cells of this closure.
    fork, waitpid, exit_now, kill = os.fork, os.waitpid, os._exit, os.kill
    write, read, close = os.write, os.read, os.close
    sigmask, all_signals, block = signal.pthread_sigmask, signal.valid_signals(), signal.SIG_BLOCK
    gc_disable, getframe, current_frames = gc.disable, sys._getframe, sys._current_frames
    get_ident = threading.get_ident
    update, typeof, length, int_type, str_type = dict.update, type, len, int, str
    recvmsg, ancillary = agent.recvmsg, socket.CMSG_SPACE(16 * 4)
    tb_of, encode = BaseException.__dict__["__traceback__"].__get__, json.encoder.encode_basestring_ascii
    frame_of = type(getframe()).__dict__["f_code"].__get__
    saved = [(vars(m), dict(vars(m))) for m in (snapshot_module, sys.modules[__name__], builtins)]
    restore, reporter = snapshot_module.Snapshot.restore, [None]  # the child's one thread, once forked
    debug_log = os.environ.get("DFA_CHECKER_DEBUG")
    mode = ["open"]  # "open" (the learner's kernel), "strict" (a test runs), "post" (the child reports)

    def trusted_globals() -> None:
        for namespace, copy in saved:
            update(namespace, copy)

    def receive(index: int) -> int:
        """The next descriptor the runner sent for test ``index`` (stale ones, from a test whose trigger
        never ran, are closed); -1 if none comes."""
        while True:
            try:
                data, cmsgs, _, _ = recvmsg(64, ancillary)
            except OSError:
                return -1
            if not data:
                return -1
            fds = [fd for _, _, raw in cmsgs for fd in memoryview(raw).cast("i")]
            if data == b"%d" % index and length(fds) == 1:
                return fds[0]
            for fd in fds:
                close(fd)

    def child(index: int, namespace: dict) -> None:
        reporter[0] = get_ident()  # fork kept only the thread that ran the trigger
        sigmask(block, all_signals)  # no learner handler may run inside the grader's code
        gc_disable()  # nor a learner finaliser
        keep = [dict(namespace)]  # every replaced object stays alive: dropping one could run its __del__
        trusted_globals()
        restore(snap, keep)
        source = receive(index)
        if source < 0:
            exit_now(1)
        test = json.loads(_read_all(read, source))
        close(source)
        namespace = _test_namespace(namespace, test.get("grader") or {}, trust.trust)
        for line in test["imports"]:  # the names the instructor's cells imported mean what they meant
            try:
                exec(compile(line, "<instructor import>", "exec"), namespace)  # noqa: S102
            except Exception:  # noqa: BLE001 (an import the learner's environment broke: the test will say)
                pass
        filename = f"<test cell {index}>"
        segments = [(hidden, compile(text, filename, "exec")) for hidden, text in test["segments"]]
        for _, code in segments:
            trust.trust(code)
        shown, hidden_sink = io.StringIO(), io.StringIO()
        sys.stderr = io.StringIO()
        failure = None
        mode[0] = "strict"
        try:
            for hidden, code in segments:
                sys.stdout = hidden_sink if hidden else shown
                exec(code, namespace)  # noqa: S102
        except BaseException as exc:  # noqa: BLE001 (SystemExit and KeyboardInterrupt fail the test too)
            failure = exc
        sigmask(block, all_signals)  # learner code may have unblocked them
        gc_disable()
        mode[0] = "post"
        if length(current_frames()) > 1:  # a learner thread could write to the verdict pipe once it exists
            if debug_log:
                with open(debug_log, "a") as log:
                    log.write(f"test {index}: threads still running: {threading.enumerate()}\n")
            exit_now(NO_THREADS_EXIT)
        trusted_globals()  # builtins and this module's names: all the reporting below uses (no json module)
        verdict = _verdict(failure, shown.getvalue(), filename, tb_of, frame_of, encode)
        target = receive(index)
        if target >= 0:
            write(target, verdict)
        exit_now(0)

    trigger, refused, frame_attributes = TRIGGER_EVENT, REFUSED_EVENTS, FRAME_ATTRIBUTES
    descriptor_path, asker_events, busy = _is_descriptor_path, ASKER_EVENTS, [None]
    trust = codetrust.CodeTrust()
    value_error, runtime_error, sigkill, fspath = ValueError, RuntimeError, signal.SIGKILL, os.fspath

    def hook(event, args) -> None:  # only closure names here: learner code may have rebound every global
        if mode[0] == "open":
            if event == trigger and length(args) == 1 and typeof(args[0]) is int_type:
                run_test(args[0])
            elif event == "sys.addaudithook":  # a learner's hook would see the test's code objects
                raise runtime_error("the grading kernel allows no other audit hook")
            return
        if mode[0] == "post" and get_ident() == reporter[0]:
            return  # the grader's own reporting, with signals, gc and every other thread stopped
        if event in refused:
            raise value_error(f"the grader does not allow {event} while a test runs")
        asked = event in asker_events or (
            event == "object.__getattr__" and length(args) == 2 and args[1] in frame_attributes
        )
        if asked and busy[0] != get_ident():
            busy[0] = get_ident()  # the trust check reads frames itself: its own events (this thread's) pass
            try:
                allowed = trust.library_asks(getframe(1))
            finally:
                busy[0] = None
            if not allowed:
                what = args[1] if event == "object.__getattr__" else event
                raise value_error(f"the grader does not allow {what} from your code while a test runs")
        if event == "open" and args and descriptor_path(args[0], fspath, typeof, int_type, str_type):
            raise value_error("the grader does not allow reopening file descriptors while a test runs")

    def run_test(index: int) -> None:
        namespace = getframe(2).f_globals  # the trigger's caller: the learner's cell, in their namespace
        pid = fork()
        if pid == 0:
            try:
                child(index, namespace)
            except BaseException:  # noqa: BLE001
                if debug_log:  # DFA_CHECKER_DEBUG=path: why a child failed to report (grader development)
                    import traceback

                    with open(debug_log, "a") as log:
                        traceback.print_exc(file=log)
            finally:
                exit_now(1)
        try:
            waitpid(pid, 0)
        except BaseException:  # an interrupt (the cell's time limit): the test goes with it
            kill(pid, sigkill)
            waitpid(pid, 0)
            raise

    sys.addaudithook(hook)


PRIVATE_MODULES = ("common.checks",)


def _test_namespace(namespace: dict, grader: dict | None = None, trust=None) -> dict:
    """The namespace a test runs in: a copy of the learner's (their functions, whose globals are the
    original, cannot rebind a name the test is about to look up), with builtins of its own whose
    ``__import__`` gives the test a private copy of the checks. Nothing the learner's code can reach refers
    to that copy, so a stub called by the test cannot patch the verdict it is about to be given.

    ``grader`` (answerkeys.attach: the lab's answers.py, the salt, the student) makes ``import answers``
    in the test give a module built here, for this test alone (answerkeys.build_module)."""
    private = {}
    for name in PRIVATE_MODULES:
        spec = importlib.util.find_spec(name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        private[name] = module
    answers = answerkeys.build_module(grader or {}, trust)
    public_import = builtins.__import__

    def test_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name == answerkeys.MODULE:
            if answers is None:
                raise ImportError("this lab has no grader-side answers module (source/<lab>/answers.py)")
            return answers
        if level == 0 and fromlist and name in private:
            return private[name]
        return public_import(name, globals, locals, fromlist, level)

    test_builtins = dict(vars(builtins))
    test_builtins["__import__"] = test_import
    copy = dict(namespace)
    copy["__builtins__"] = test_builtins
    for name, module in private.items():  # the names the learner's cells hold, in the test's copy only
        for key, value in list(copy.items()):
            public = sys.modules.get(name)
            if public is not None and getattr(public, key, None) is value and key in vars(module):
                copy[key] = vars(module)[key]
    return copy


def _is_descriptor_path(path, fspath, typeof, int_type, str_type) -> bool:
    if typeof(path) is int_type:
        return True
    try:
        path = fspath(path)
    except TypeError:
        return False
    if typeof(path) is bytes:
        path = path.decode("latin-1")
    if typeof(path) is not str_type:
        return False
    return path.startswith("/dev/fd") or (path.startswith("/proc/") and any(p in path for p in PROC_PARTS))


def _read_all(read, fd: int) -> bytes:
    chunks = []
    while chunk := read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _verdict(failure, shown: str, filename: str, tb_of, frame_of, encode) -> bytes:
    """The verdict as JSON bytes: ``passed``, the visible segments' printed text, and for a failure the
    exception's type name, its message when it is plain text, and the test line where it surfaced. Nothing
    here calls a method of the learner's objects (the exception may be theirs)."""
    record = {"passed": failure is None, "stdout": shown[:MAX_VERDICT_OUTPUT]}
    if failure is not None:
        kind = type(failure)
        record["ename"] = type.__dict__["__name__"].__get__(kind)
        args = BaseException.__dict__["args"].__get__(failure)
        plain = all(type(a) in (str, int, float) for a in args)
        record["evalue"] = str(args[0] if len(args) == 1 else ", ".join(map(str, args)))[:2000] if plain else ""
        line, tb = None, tb_of(failure)
        while tb is not None:
            if frame_of(tb.tb_frame).co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        record["line"] = line
    # JSON by hand, with the encoder bound before any learner code: the json module may have been patched
    fields = []
    for key, value in record.items():
        if value is None or type(value) is bool:
            text = {None: "null", True: "true", False: "false"}[value]
        elif type(value) is int:
            text = int.__repr__(value)
        else:
            text = encode(value)
        fields.append(f'"{key}": {text}')
    return ("{" + ", ".join(fields) + "}").encode()


def start_kernel(agent_path: str, kernel_args: list[str], modules=()) -> None:
    """The grading kernel: connect to the runner, install the checker, then run IPython's kernel."""
    agent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    agent.connect(agent_path)
    if sys.path and (sys.path[0] in ("", os.getcwd())):
        del sys.path[0]  # as ipykernel_launcher does; IPython puts the notebook's folder back
    install(agent, modules)
    from ipykernel import kernelapp

    sys.argv = ["ipykernel_launcher", *kernel_args]
    kernelapp.launch_new_instance()
