"""This machine, measured: the ``torch.utils.benchmark`` harness and its peak probes (``bench``), what this
machine is and which catalog chip it is nearest to (``devices``), the device a lab measures on, GPU when there is
one (``lab_device``), this machine's measured roofs in each dtype (``roofs``), a real model's step timed op by op
(``op_profile``), and runs recorded on real machines for learners without one (``reference``, with
``reference_data/``). Every number here is MEASURED and says on which machine.

May import: ``chips``, ``graph``, ``models``, ``roofline``, ``sim``.
"""
