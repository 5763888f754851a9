"""Course 5's debugging tools: the eight-layer failure taxonomy as data (``taxonomy``), the first-divergence finder
(``divergence``), the delta-debugging reducer (``reducer``), timing regions (``timing``), planted bugs seeded per
learner (``bugs``), PyTorch's own stack and its dtypes (``stack``), and compiled Spyre kernel descriptions with
their copy ranges per stick (``kernel_text``).

May import: ``chips``, ``sim``.
"""
