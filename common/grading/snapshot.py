"""What the grader's test cells rely on, captured before any learner code runs and put back before each test.

The grading kernel (checker.py) takes one ``Snapshot`` as it starts, after importing the packages tests use
(torch, numpy, ``common``) and before the learner's first cell. Each test then runs in a child forked from
the kernel, and the child calls ``restore()`` first. What comes back:

* every module the snapshot saw, in ``sys.modules`` (a learner's fake ``common.checks`` is dropped);
* in each module's namespace, every binding whose saved value is code (a function, class, module,
  descriptor): ``torch.allclose = lambda *a, **k: True`` is undone. In ``common.*`` immutable data too
  (tolerances, names), but not ``None`` (lazy caches fill those legitimately);
* in each class of those modules, every method or descriptor (``type(grader)._verdict = ...``), and in
  ``common.*`` classes, methods a learner added are removed;
* the code, defaults and closure of every ``common.*`` function (``f.__code__ = g.__code__``);
* ``builtins``, the import machinery (``sys.path``, ``meta_path``, ``path_hooks``) and the interpreter hooks
  (display, except, breakpoint, unraisable); tracing, profiling and ``sys.monitoring`` are switched off.

Data that is mutated in place (a dict entry, a tensor) is not covered: hidden tests compare against literal
reference values for that reason (``common.checks.reference_literal``).
"""

from __future__ import annotations

import builtins
import sys
import threading
import types
import warnings

PROTECTED = ("common",)  # packages whose data bindings are restored too, and whose classes lose additions
_CODE_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
    classmethod,
    staticmethod,
    property,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.ClassMethodDescriptorType,
)
_DATA_TYPES = (int, float, complex, str, bytes, bool, tuple, frozenset)
_HOOKS = ("displayhook", "excepthook", "breakpointhook", "unraisablehook")
_MISSING = object()
_setattr = type.__setattr__
_delattr = type.__delattr__


def _is_code(value) -> bool:
    return isinstance(value, _CODE_TYPES)


def _protected(name) -> bool:
    return type(name) is str and any(name == p or name.startswith(p + ".") for p in PROTECTED)


class Snapshot:
    """The saved state; ``restore()`` puts it back in this process (a disposable child: nothing is undone)."""

    def __init__(self) -> None:
        with warnings.catch_warnings():  # reading a deprecated module attribute warns (torch.distributed)
            warnings.simplefilter("ignore")
            self._capture()

    def _capture(self) -> None:
        self.modules: dict[str, tuple[types.ModuleType, dict]] = {}
        self.classes: list[tuple[type, dict, bool]] = []
        self.functions: list[tuple] = []
        for name, module in list(sys.modules.items()):
            if not isinstance(module, types.ModuleType):
                continue
            namespace = dict(vars(module))
            self.modules[name] = (module, namespace)
            protected = _protected(name)
            for value in namespace.values():
                if isinstance(value, type) and vars(value).get("__module__") == name:
                    self.classes.append((value, dict(vars(value)), protected))
                    if protected:
                        self._functions(vars(value).values())
            if protected:
                self._functions(namespace.values())
        self.builtins = dict(vars(builtins))
        self.hooks = {name: getattr(sys, name) for name in _HOOKS}
        self.path, self.meta_path, self.path_hooks = list(sys.path), list(sys.meta_path), list(sys.path_hooks)

    def _functions(self, values) -> None:
        for value in values:
            if isinstance(value, (classmethod, staticmethod)):
                value = value.__func__
            if isinstance(value, types.FunctionType):
                cells = tuple(_cell_value(c) for c in value.__closure__ or ())
                self.functions.append((value, value.__code__, value.__defaults__, value.__kwdefaults__, cells))

    def restore(self, keep: list) -> int:
        """Put the snapshot back; returns how many bindings had changed (a hint for review, not a verdict).

        Every value replaced goes into ``keep``: the caller holds them, so that none is freed here (a
        learner's ``__del__`` would run in the middle of the restore)."""
        changed = 0
        for name, (module, saved) in self.modules.items():
            if sys.modules.get(name) is not module:
                keep.append(sys.modules.get(name))
                sys.modules[name] = module
                changed += 1
            changed += _restore_namespace(vars(module), saved, _protected(name), keep)
        for cls, saved, protected in self.classes:
            changed += _restore_class(cls, saved, protected, keep)
        for fn, code, defaults, kwdefaults, cells in self.functions:
            keep.append((fn.__code__, fn.__defaults__, fn.__kwdefaults__))
            if fn.__code__ is not code:
                fn.__code__ = code
                changed += 1
            if fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
                fn.__defaults__, fn.__kwdefaults__ = defaults, kwdefaults
                changed += 1
            for cell, value in zip(fn.__closure__ or (), cells, strict=False):
                if value is not _MISSING and _cell_value(cell) is not value:
                    keep.append(_cell_value(cell))
                    cell.cell_contents = value
                    changed += 1
        changed += _restore_namespace(vars(builtins), self.builtins, True, keep, every=True)
        for name, hook in self.hooks.items():
            if getattr(sys, name) is not hook:
                keep.append(getattr(sys, name))
                setattr(sys, name, hook)
                changed += 1
        keep.append((list(sys.path), list(sys.meta_path), list(sys.path_hooks)))
        sys.path[:], sys.meta_path[:], sys.path_hooks[:] = self.path, self.meta_path, self.path_hooks
        sys.path_importer_cache.clear()
        stop_tracing()
        return changed


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _restore_namespace(current: dict, saved: dict, protected: bool, keep: list, every: bool = False) -> int:
    changed = 0
    for key, value in saved.items():
        now = current.get(key, _MISSING)
        if now is value:
            continue
        if every or _is_code(value) or (protected and isinstance(value, _DATA_TYPES)):
            keep.append(now)
            current[key] = value
            changed += 1
    return changed


def _restore_class(cls: type, saved: dict, protected: bool, keep: list) -> int:
    changed = 0
    current = dict(vars(cls))
    keep.append(current)
    for key, value in saved.items():
        if key in _CLASS_BOOKKEEPING or current.get(key, _MISSING) is value:
            continue
        if _is_code(value) or protected:
            changed += _try(_setattr, cls, key, value)
    if protected:
        for key in current.keys() - saved.keys():
            if key not in _CLASS_BOOKKEEPING and (callable(current[key]) or _is_code(current[key])):
                changed += _try(_delattr, cls, key)
    return changed


_CLASS_BOOKKEEPING = frozenset({"__dict__", "__weakref__", "__abstractmethods__", "_abc_impl", "__slotnames__"})


def _try(action, *args) -> int:
    try:
        action(*args)
        return 1
    except (TypeError, AttributeError):  # a C type, or an attribute no class may set: nothing to undo
        return 0


def stop_tracing() -> None:
    """No trace, profile or monitoring callback of the learner's may watch a test run."""
    sys.settrace(None)
    sys.setprofile(None)
    threading.settrace(None)
    threading.setprofile(None)
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+
    if monitoring is None:
        return
    events = [getattr(monitoring.events, name) for name in dir(monitoring.events) if name.isupper()]
    for tool in range(6):
        if monitoring.get_tool(tool) is None:
            continue
        monitoring.set_events(tool, 0)
        for event in events:
            if event and event & (event - 1) == 0:  # a single event, not a group such as NO_EVENTS
                monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)
