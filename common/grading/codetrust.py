"""Whose code is asking? While a test runs, frames and attribute writes are allowed to library code only.

torch, ``typing``, ``dataclasses`` and ``enum`` call ``sys._getframe`` to find a caller's module, and
tracebacks are formatted from ``tb_frame``; a learner's function must not get a frame, since every frame
leads up to the test's own (its code object holds the hidden test's constants). ``CodeTrust.library_asks``
decides from the frame that made the request:

* a code object is **genuine library code** if its file lies in the standard library, site-packages or the
  ``common`` package (read-only in the sandbox) and an equal code object comes out of compiling that file.
  The file name alone proves nothing (``compile(src, "/usr/lib/python3/inspect.py", ...)``); a code object
  equal to the library's does what the library does. The test's own code is trusted by identity.
* helpers that hand a frame to *their* caller (``inspect.currentframe``, ``inspect.stack``,
  ``traceback.walk_stack``, ``logging.currentframe`` …) are skipped: what counts is who called them.
"""

from __future__ import annotations

import os
import sysconfig

import common

# (file name, function name) of library functions that return frames to their caller
FRAME_HELPERS = frozenset(
    {
        ("inspect.py", "currentframe"), ("inspect.py", "stack"), ("inspect.py", "trace"),
        ("inspect.py", "getouterframes"), ("inspect.py", "getinnerframes"), ("traceback.py", "walk_stack"),
        ("traceback.py", "walk_tb"), ("__init__.py", "<lambda>"),
    }
)  # fmt: skip
MAX_DEPTH = 64


def trusted_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"], *common.__path__}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


class CodeTrust:
    """Made in the kernel before any learner code; used in a test's child (where its caches live and die)."""

    def __init__(self) -> None:
        # bound now, before any learner code: a test's callee may rebind builtins and os.path by the time
        # these run (a changed compile or open could only make a file look *less* genuine, never more)
        self._open, self._compile, self._code_type = open, compile, type(self.__init__.__code__)
        self.roots = trusted_roots()
        self.trusted: dict[int, object] = {}  # id -> code (kept alive, so an id is never reused)
        self.untrusted: dict[int, object] = {}
        self._files: dict[str, set] = {}

    def trust(self, code) -> None:
        """Trust ``code`` and the code nested in it (the grader's own test code)."""
        stack = [code]
        while stack:
            item = stack.pop()
            self.trusted[id(item)] = item
            stack += [c for c in item.co_consts if type(c) is self._code_type]

    def is_library(self, code) -> bool:
        if id(code) in self.trusted:
            return True
        if id(code) in self.untrusted:
            return False
        filename = code.co_filename
        genuine = (
            type(filename) is str
            and "/../" not in filename
            and filename.startswith(self.roots)
            and code in self._compiled(filename)
        )
        (self.trusted if genuine else self.untrusted)[id(code)] = code
        return genuine

    def _compiled(self, path: str) -> set:
        """Every code object compiling ``path`` gives (cached per file)."""
        if path not in self._files:
            codes = set()
            try:
                with self._open(path, "rb") as f:
                    stack = [self._compile(f.read(), path, "exec", dont_inherit=True)]
            except (OSError, SyntaxError, ValueError):
                stack = []
            while stack:
                code = stack.pop()
                codes.add(code)
                stack += [c for c in code.co_consts if type(c) is self._code_type]
            self._files[path] = codes
        return self._files[path]

    def library_asks(self, frame) -> bool:
        """Is the code that asked (``frame``, or whoever called the frame helpers it went through) library
        code or the grader's?"""
        for _ in range(MAX_DEPTH):
            if frame is None:
                return False
            code = frame.f_code
            helper = (os.path.basename(code.co_filename), code.co_name) in FRAME_HELPERS
            if not (helper and self.is_library(code)):
                return self.is_library(code)
            frame = frame.f_back
        return False

