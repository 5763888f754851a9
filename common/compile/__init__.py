"""Course 3's compiler tools: the real LLM under ``torch.compile`` (eager, aot_eager, inductor) on prefill and a
decode step, and where transformers' model and ``generate`` break and recompile (``real_model``); inspecting
backends, timing them and reading Inductor's generated code (``tools``); pointwise fusion over aten FX: op classes,
the legality check and the rewrite (``fusion``); the Spyre lowering stage by stage (``lowering``).

May import: ``chips``, ``graph``, ``measure``, ``sim``.
"""
