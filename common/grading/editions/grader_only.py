"""Which functions of ``common`` are the reference answer of a graded stub: the grader may use them, learners
must not have them.

A lab asks the learner to write a *graded stub* (``run_dataflow`` in Lab 2); its hidden tests compare the
learner's function with a *reference* (``common.dataflow.interpreter.run_tokens``). If the published package defines the
reference, calling it earns the points. ``GRADER_ONLY`` lists every such pair, one line each, as
``(course/lab, stub, "module:qualname")`` — the instructor's mark that says "this is the answer". Evidence for
each entry: the hidden test compares the stub with that function (or the visible check names it).

``dfa check --published OUT`` reports every listed reference that the published ``common`` still defines;
``dfa publish`` leaves one out of the published package only when no release notebook and no other published
module uses it (publish.py). ``NOT_REFERENCES`` records functions that share a stub's name but are not its
answer, so that ``registry_problems`` (run by ``dfa check --published`` and the tests) can ask of every
namesake: registered, or explained? A stub that is a class (``PagedKVAllocator``) is listed like a function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

from common.grading.courses import standard

GRADER_ONLY: tuple[tuple[str, str, str], ...] = (
    # Empty: every graded stub's reference is in its lab's source/<lab>/answers.py (answerkeys.py), and the
    # library functions that do what a stub does are explained in NOT_REFERENCES.
)

# (course/lab, stub, "module:qualname") -> why that namesake is not the stub's answer.
NOT_REFERENCES: dict[tuple[str, str, str], str] = {
    (
        "course3_compile/lab3_compile",
        "sticks",
        "common.sim.machines.spyre:stick_layout",
    ): "the simulator's layout: 128-B sticks on the innermost dim; hidden tests use 64/256-B sticks along other dims",
    (
        "course3_compile/deepdive3_spyre",
        "device_layout",
        "common.sim.machines.spyre:stick_layout",
    ): "the simulator's layout: 128-B sticks on the innermost dim; hidden tests use 64/256-B sticks along other dims",
    (
        "course5_debug/lab5_debug",
        "split_time",
        "common.debug.timing:exclusive_split",
    ): "hard-codes the kernel-first priority (timing_region needs it); the hidden tests ask other priority orders",
    (
        "course5_debug/lab5_debug",
        "fix_stick",
        "common.debug.bugs:PlantedBug.reference",
    ): "the CPU answer: a fix must be made of device outputs that did the model's FLOPs (device_problems)",
    (
        "course5_debug/lab5_debug",
        "fix_hang",
        "common.debug.bugs:PlantedBug.reference",
    ): "the CPU answer: a fix must be made of device outputs that did the model's FLOPs (device_problems)",
    (
        "course5_debug/lab5_debug",
        "fix_overflow",
        "common.debug.bugs:PlantedBug.reference",
    ): "the CPU answer: a fix must be made of device outputs that did the model's FLOPs (device_problems)",
    (
        "course5_debug/deepdive5_spyre",
        "sticks_needed",
        "common.sim.machines.spyre:stick_layout",
    ): "hard-codes the catalog's 128-byte stick; the stub takes stick_bytes and hidden tests use 64 and 256 B",
    (
        "course2_dataflow/deepdive2_spyre",
        "edge_table",
        "common.compile.lowering:edge_table",
    ): "edges of the aten graph with shapes and strides; the stub tabulates a Spyre Program's kernels and via",
    # Lab 2's run_tokens, full_throughput_capacities/levels and list_schedule moved to its answers.py.
    (
        "course2_dataflow/lab2_dataflow",
        "node_annotations",
        "common.graph.costs:node_table",
    ): "bound from a catalog chip; the stub takes peak and bandwidth, hidden tests use rooflines no chip has",
    (
        "course2_dataflow/lab2_dataflow",
        "dma_edges",
        "common.dataflow.graphview:dma_edges",
    ): "reads reads/out_device_bytes, not the spec's fields; hidden tests use what-if plans holding only those",
    (
        "course2_dataflow/deepdive2_spyre",
        "stick_plan",
        "common.sim.machines.spyre:stick_layout",
    ): "library hard-codes the catalog's 128-byte stick; the stub takes stick_bytes, hidden tests use 32/64/256 B",
    (
        "course4_memory/lab4_memory",
        "lpu_chips",
        "common.memory.kvcache:chips_needed",
    ): "kv_limits needs it; it stores weights and KV in one dtype, the stub takes kv_dtype (hidden tests: fp8, int8)",
    (
        "course4_memory/lab4_memory",
        "kv_bytes",
        "common.memory.kvcache:kv_cache_bytes",
    ): "kv_limits' formula with the model's own KV heads; the stub takes attention=mha/gqa/mqa (hidden: all three)",
    (
        "course4_memory/lab4_memory",
        "kv_bytes",
        "common.models:ModelConfig.kv_bytes_per_token",
    ): "the simulator's per-token size (the model's own grouping); the stub's attention=mha/mqa it cannot give",
    (
        "course4_memory/lab4_memory",
        "kv_bytes",
        "common.models.spec:ModelConfig.kv_bytes",
    ): "one sequence's KV bytes (the model's own grouping and windows); the stub takes attention=mha/mqa",
    (
        "course6_roofline/lab6_roofline",
        "predict",
        "common.explore.predict:predict",
    ): "records a learner's prediction before a reveal; the stub predicts a roofline time from given ceilings",
    (
        "course4_memory/deepdive4_spyre",
        "lx_tile_budget",
        "common.memory.traffic:default_lx_budget",
    ): "the simulator's budget from a catalog chip; the stub takes a scratchpad's numbers, hidden tests use others",
    (
        "course6_roofline/lab6_roofline",
        "ridge_point",
        "common.chips.types:Chip.ridge_point",
    ): "reads the catalog chip; the stub takes raw numbers, and hidden tests use unlimited peak or bandwidth",
    (
        "course1_landscape/lab1_landscape",
        "measure",
        "common.measure.bench:measure",
    ): "the harness other labs time with; it syncs only CUDA, and hidden tests time a device through a given sync",
    (
        "course1_landscape/lab1_landscape",
        "measure",
        "common.measure.lab_device:LabDevice.measure",
    ): ("common.measure.bench.measure on the lab's chosen device; it syncs only that device, hidden tests pass "
        "their own sync"),
    (
        "course1_landscape/deepdive1_spyre",
        "sticks",
        "common.sim.machines.spyre:stick_layout",
    ): "the simulator's layout, hard-coded to the catalog's 128 B stick; hidden tests use 64, 96 and 256 B sticks",
    (
        "course6_roofline/lab6_roofline",
        "attainable",
        "common.roofline.model:Roofline.attainable",
    ): "the plotter's roof; a Roofline takes finite ceilings only, and hidden tests use infinite peak or bandwidth",
    (
        "course6_roofline/lab6_roofline",
        "ridge_point",
        "common.roofline.model:Roofline.ridge_point",
    ): "the plotter's ridge; finite ceilings only (hidden tests: infinite ones), and system_ridges must use the stub",
    (
        "course6_roofline/lab6_roofline",
        "op_points",
        "common.sim.report:Report.roofline_points",
    ): "the plotted view at main memory only; the stub takes a level and hidden tests ask for SMEM and VMEM",
}


def split(reference: str) -> tuple[str, str]:
    """``"common.x:A.f"`` -> (``"common.x"``, ``"A.f"``)."""
    module, _, qualname = reference.partition(":")
    return module, qualname


def module_file(package_parent: Path, module: str) -> Path | None:
    """The file of ``module`` under ``package_parent`` (the folder holding ``common/``), if there is one."""
    base = package_parent.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def definition(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The top-level ``def``/``class`` (or a method, ``Class.name``) that ``qualname`` names in ``tree``."""
    body, node = tree.body, None
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        body = getattr(node, "body", [])
    return node


def defines(path: Path, qualname: str) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return definition(tree, qualname) is not None


def answer_key_imports(course, lab: str) -> list[str]:
    """``module:name`` of everything the lab's ``answers.py`` imports from the student package ``common``, at any
    depth: a graded answer computed by a library function is one a learner can compute by calling it."""
    path = course.source_dir / lab / "answers.py"
    if not path.is_file():
        return []
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "common" and not node.level:
            found += [f"{node.module}:{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [f"{alias.name}:*" for alias in node.names if alias.name.split(".")[0] == "common"]
    return sorted(set(found))


def answer_key_problems(courses) -> list[str]:
    """Imports of an answers.py from ``common`` that ``ANSWER_KEY_IMPORTS`` does not explain, and entries that
    no answers.py imports any more."""
    problems, seen = [], set()
    for course in courses:
        for lab in course.labs():
            where = f"{course.name}/{lab}"
            for name in answer_key_imports(course, lab):
                seen.add((where, name))
                if (where, name) not in ANSWER_KEY_IMPORTS:
                    problems.append(f"grader_only: {where}/answers.py imports {name}: say in ANSWER_KEY_IMPORTS "
                                    "why it computes no graded answer (else a learner can call it)")  # fmt: skip
    known = {f"{c.name}/{lab}" for c in courses for lab in c.labs()}
    problems += [f"grader_only: ANSWER_KEY_IMPORTS lists {w} {n}, which its answers.py no longer imports"
                 for w, n in ANSWER_KEY_IMPORTS if w in known and (w, n) not in seen]  # fmt: skip
    return problems


# (course/lab, "module:name") an answers.py imports from common -> why it computes no graded answer of that lab.
CATALOG = "catalog data (chip records, dtype sizes) every lab reads: no answer is computed by it"
ANSWER_KEY_IMPORTS: dict[tuple[str, str], str] = {
    ("course4_memory/deepdive4_spyre", "common.chips:DTYPE_BYTES"):
        CATALOG,
    ("course4_memory/deepdive4_spyre", "common.sim.run:simulate_op"):
        "the simulator the lab hands out; most_traffic_per_byte's graded part is the sweep over K and the ratio to "
        "useful bytes, which no function of common returns",
    ("course1_landscape/lab1_landscape", "common.explore.widget:BATCHES"):
        "the explorer's batch menu: the question's search space, computes nothing",
    ("course1_landscape/lab1_landscape", "common.sim:simulate_llm"):
        "the simulator the lab hands out; first_compute_bound_batch's graded part is the sweep and the smallest "
        "compute-bound batch, which no function of common returns",
    ("course4_memory/lab4_memory", "common.errors:DFAError"):
        "the one-line error class: computes nothing",
    ("course4_memory/lab4_memory", "common.models:get_config"):
        "the catalog's model configurations: computes nothing",
    ("course4_memory/lab4_memory", "common.sim.run:make_policy"):
        "the simulated machine's placement rule the explorer shows; longest_context's graded part is the search "
        "for the longest context that fits, which no function of common returns",
    ("course4_memory/lab4_memory", "common.sim.workload:llm_step"):
        "the decode step's workload the placement rule sizes; the search is the learner's",
    ("course1_landscape/deepdive1_spyre", "common.chips:DTYPE_BYTES"):
        CATALOG,
    ("course1_landscape/deepdive1_spyre", "common.chips:get_chip"):
        CATALOG,
    ("course1_landscape/lab1_landscape", "common.chips:get_chip"):
        CATALOG,
    ("course2_dataflow/lab2_dataflow", "common.graph.costs:annotate"):
        "the cost pass the lab hands out; node_annotations' graded part is the bound from given peak/bandwidth",
    ("course2_dataflow/lab2_dataflow", "common.graph.costs:node_table"):
        "a table of annotate's numbers; NOT_REFERENCES: it bounds by a catalog chip, the stub by given rooflines",
    ("course2_dataflow/lab2_dataflow", "common.dataflow.interpreter:Evaluator"):
        "evaluates one node; run_dataflow's graded part is the token firing order and buffers around it",
    ("course2_dataflow/lab2_dataflow", "common.models:TinyTransformerBlock"):
        "the model Part 4 simulates (input of the landscape check), not an answer",
    ("course2_dataflow/lab2_dataflow", "common.dataflow.schedule:Schedule"):
        "the result container the lab's scheduler fills and draws",
    ("course2_dataflow/lab2_dataflow", "common.dataflow.schedule:Slot"):
        "the result container the lab's scheduler fills and draws",
    ("course2_dataflow/lab2_dataflow", "common.dataflow.schedule:upward_rank"):
        "the priority the lab hands out; static_list_schedule's graded part is placing ranked nodes on PEs",
    ("course2_dataflow/lab2_dataflow", "common.sim.run:make_policy"):
        "the simulator the lab runs in Part 4 (landscape consistency check), not a stub's answer",
    ("course2_dataflow/lab2_dataflow", "common.sim.workload:graph_workload"):
        "the simulator the lab runs in Part 4 (landscape consistency check), not a stub's answer",
    ("course2_dataflow/lab2_dataflow", "common.sim:simulate"):
        "the simulator the lab runs in Part 4 (landscape consistency check), not a stub's answer",
    ("course3_compile/deepdive3_spyre", "common.chips:DTYPE_BYTES"):
        CATALOG,
    ("course3_compile/deepdive3_spyre", "common.compile.lowering:CUSTOM_OPS"):
        "the names of Spyre's custom ops, which the lab shows; lowering_summary counts them itself",
    ("course3_compile/lab3_compile", "common.chips:chips_of_kind"):
        CATALOG,
    ("course3_compile/lab3_compile", "common.compile.tools:qualified_op_name"):
        "names one node; my_count_ops' graded part is which nodes count and the tally",
    ("course3_compile/lab3_compile", "common.compile.tools:ops_in_kernel_name"):
        "used for fused_kernels, which no stub asks; kernel_names' answer is its own regex",
    ("course3_compile/lab3_compile", "common.compile.fusion:classify"):
        "the op classes the lab hands out; my_find_groups' graded part is the grouping (docs/architecture.md)",
    ("course4_memory/lab4_memory", "common.memory.cache:LRUCache"):
        "the cache model the lab hands out; cache_traffic's graded part is the tiling's address stream through it",
    ("course4_memory/lab4_memory", "common.memory.cache:MatmulTiling"):
        "the tiling record the stubs take as input",
    ("course4_memory/lab4_memory", "common.chips:DTYPE_BYTES"):
        CATALOG,
    ("course4_memory/lab4_memory", "common.chips:canonical_dtype"):
        CATALOG,
    ("course4_memory/lab4_memory", "common.chips:get_chip"):
        CATALOG,
    ("course5_debug/deepdive5_spyre", "common.chips:DTYPE_BYTES"):
        CATALOG,
    ("course5_debug/deepdive5_spyre", "common.chips:get_chip"):
        CATALOG,
    ("course5_debug/lab5_debug", "common.debug.divergence:first_divergence"):
        "the lab's given tool (Part 1 demo); it finds a node, which no stub returns",
    ("course5_debug/lab5_debug", "common.debug.reducer:reduce"):
        "the lab's given tool (Part 1 demo); it cuts a graph, which no stub returns",
    ("course5_debug/lab5_debug", "common.debug.timing:CATEGORIES"):
        "the event kinds' names",
    ("course5_debug/lab5_debug", "common.debug.timing:category"):
        "an event's kind; split_time's graded part is the priority-ordered split",
    ("course5_debug/lab5_debug", "common.debug.timing:exclusive_split"):
        "NOT_REFERENCES: fixed kernel-first priority; hidden tests ask other orders",
    ("course5_debug/lab5_debug", "common.debug.timing:timing_region"):
        "the region for perf_region (a judgement helper); fix_perf's graded part is the fix",
    ("course5_debug/lab5_debug", "common.debug:bugs"):
        "plants the cases the learner debugs (they run in the learner's kernel); the fixes are judged on device traces",
    ("course6_roofline/deepdive6_spyre", "common.chips:get_chip"):
        CATALOG,
    ("course6_roofline/lab6_roofline", "common.chips:get_chip"):
        CATALOG,
    ("course6_roofline/lab6_roofline", "common.roofline:roofline_for_chip"):
        "ridge_table (no stub) for the plot; the ridge_point stub takes raw numbers, infinite ones included",
    ("course6_roofline/lab6_roofline", "common.sim:simulate_llm"):
        "the simulator the lab asks the learner to run; decode_sweep's graded part is intensity and attainment",
}


def graded_stubs(course, lab: str) -> list[str]:
    """Names the learner writes in a lab: top-level ``def``/``class`` of its solution cells (source notebook)."""
    nb = nbformat.read(course.source_notebook(lab), as_version=4)
    names = []
    for cell in nb.cells:
        if standard.is_stub(cell) and "BEGIN SOLUTION" in cell.source:
            names += re.findall(r"^(?:def|class)\s+(\w+)", cell.source, re.MULTILINE)
    return names


def _definitions(package_parent: Path) -> dict[str, list[str]]:
    """name -> ``module:qualname`` of every top-level function or class, and method, of the package."""
    index: dict[str, list[str]] = {}
    for path in sorted((package_parent / "common").rglob("*.py")):
        if "grading" in path.relative_to(package_parent).parts:
            continue
        module = ".".join(path.relative_to(package_parent).with_suffix("").parts).removesuffix(".__init__")
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                index.setdefault(node.name, []).append(f"{module}:{node.name}")
            if isinstance(node, ast.ClassDef):
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        index.setdefault(m.name, []).append(f"{module}:{node.name}.{m.name}")
    return index


def registry_problems(courses, package_parent: Path) -> list[str]:
    """Entries whose stub or reference no longer exists, and namesakes of a stub that nothing explains."""
    stubs = {f"{c.name}/{lab}": graded_stubs(c, lab) for c in courses for lab in c.labs()}
    problems = []
    for where, stub, reference in GRADER_ONLY:
        if where in stubs and stub not in stubs[where]:
            problems.append(f"grader_only: {where} has no graded stub {stub!r} (GRADER_ONLY is stale)")
        module, qualname = split(reference)
        path = module_file(package_parent, module)
        if path is None or not defines(path, qualname):
            problems.append(f"grader_only: {reference} (reference of {where} {stub}) is not defined in common")
    known = {(w, s, r) for w, s, r in GRADER_ONLY} | set(NOT_REFERENCES)
    index = _definitions(package_parent)
    for where, names in stubs.items():
        for stub in names:
            for namesake in index.get(stub, []):
                if (where, stub, namesake) not in known:
                    problems.append(
                        f"grader_only: {namesake} has the name of {where}'s graded stub {stub}: "
                        "list it in GRADER_ONLY, or say in NOT_REFERENCES why it is not the answer"
                    )
    return problems + answer_key_problems(courses)
