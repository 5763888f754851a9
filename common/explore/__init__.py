"""What-if explorers: a learner moves a control (model, machines and their chips, phase, batch, sequence length,
dtype, serving stack) and five simulated machines answer at once. ``whatif`` holds the choices, checks them and
turns them into one row per machine (time per step, tokens/s, the bottleneck and its shares, bytes per memory
level, how many chips hold the model); ``figure`` draws those rows into one figure that is redrawn in place;
``widget`` puts ipywidgets controls around both, and where no widget can render (nbconvert, papermill, grading,
CI, a plain shell) prints the table and saves the figure instead; ``context`` is the context view (where the KV
cache lives on each machine, where the context runs out, what paging buys); ``roofline_view`` puts the same
controls around one step's operating point under each machine's memory, compute and scheduling ceilings;
``sticks_view`` moves a Spyre matmul's shape and dtype through its stick layout, chosen tile, LX fit and LPDDR5
traffic. Every number is SIMULATED and says so. ``predict`` has the learner commit a prediction (a value, or a
ranking of the machines) before the explorer shows the answer, keeps it beside the landscape map, and judges it
side by side with the outcome.

May import: ``chips``, ``landscape``, ``memory``, ``models``, ``roofline``, ``sim``.
"""
from common.explore.context import context_curves, context_rows
from common.explore.predict import Prediction, kendall_tau, predict
from common.explore.sticks_view import StickChoices, SticksExplorer, sticks_explorer
from common.explore.whatif import Choices, machine_rows
from common.explore.widget import Explorer, explore, widgets_can_render

__all__ = ["Choices", "Explorer", "Prediction", "StickChoices", "SticksExplorer", "context_curves", "context_rows",
           "explore", "kendall_tau", "machine_rows", "predict", "sticks_explorer", "widgets_can_render"]
