"""Course 4's memory systems: a set-associative LRU cache and scratchpad DMA schedules (``cache``), KV-cache sizes,
limits per system and a paged allocator (``kvcache``), the torch.profiler memory timeline of a real step
(``memtimeline``), and LPDDR↔scratchpad traffic per op, tile size and stick alignment on Spyre (``traffic``).

May import: ``chips``, ``measure``, ``models``, ``sim``.
"""
