"""Course 1's accelerator landscape map (Figure 1 of the specialization): the map and its file, one per learner,
that all six courses extend (``map``), each course's rows computed from the simulators and the learner's
measurements (``courses``), checks of a row a learner adds (``rows``), and where the file is kept: disk, Google
Drive or a download (``store``). The package re-exports ``map``'s public names.

May import: ``chips``, ``graph``, ``memory``, ``models``, ``roofline``, ``sim``.
"""
from common.landscape.map import (
    COURSES,
    DEFAULT_FILE,
    ENV_VAR,
    SOURCES,
    SYSTEM_OF_BACKEND,
    SYSTEMS,
    LandscapeMap,
    data_dir,
    dominant_operator,
    format_value,
    system_name,
    tensor_core_terms,
)
from common.landscape.store import download_map, keep_on_drive, open_map, upload_map

__all__ = ["COURSES", "DEFAULT_FILE", "ENV_VAR", "SOURCES", "SYSTEMS", "SYSTEM_OF_BACKEND", "LandscapeMap",
           "data_dir", "dominant_operator", "download_map", "format_value", "keep_on_drive", "open_map",
           "system_name", "tensor_core_terms", "upload_map"]
