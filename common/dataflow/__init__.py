"""Course 2's dataflow execution models: a token-driven interpreter over an FX graph with bounded edge buffers,
back-pressure and deadlock detection (``interpreter``), an abstract machine of P processing elements with static
list scheduling and a dynamic ready queue (``schedule``), and a compiled Spyre program read back as a dataflow
graph of fusions, DMA and restickify edges (``graphview``).

May import: ``chips``, ``graph``, ``models``, ``sim``.
"""
