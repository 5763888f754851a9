"""One landscape map for the six courses: merging keeps the learner's rows, a lab rebuilds the
catalog and simulator rows of earlier courses that the map lacks, Course 6 exports it, and the Colab helpers do
nothing harmful off Colab."""
from __future__ import annotations

import csv
import sys
import types

import matplotlib
import pytest

matplotlib.use("Agg")

from common.landscape.courses import ATTRIBUTES, course_rows, fill_course, missing, rebuild  # noqa: E402
from common.landscape.map import SYSTEMS, LandscapeMap  # noqa: E402
from common.landscape.store import download_map, keep_on_drive, open_map, upload_map  # noqa: E402


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """A learner's data folder and a notebook folder of their own; no $DFA_LANDSCAPE."""
    monkeypatch.delenv("DFA_LANDSCAPE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    return tmp_path / "data" / "dataflow-labs" / "landscape_map.json"


def test_merge_adds_missing_cells_and_never_replaces_a_learner_row(tmp_path):
    mine = LandscapeMap(tmp_path / "a.json")
    mine.add("GPU", "execution model", "SIMT kernels from a host", course=1, source="learner")
    mine.add("TPU", "peak FLOP/s", 1.0, course=6, source="catalog")
    other = LandscapeMap(tmp_path / "b.json")
    other.add("GPU", "execution model", "something else", course=1, source="learner")  # conflict: kept as mine
    other.add("TPU", "peak FLOP/s", "my own estimate", course=6, source="learner")  # a learner row beats a rebuilt one
    other.add("LPU", "KV-cache strategy", "SRAM across the chips", course=4, source="learner")  # new: added
    added, conflicts = mine.merge(other)
    assert added == 2 and len(conflicts) == 1 and "execution model" in conflicts[0]
    assert mine.get("GPU", "execution model") == "SIMT kernels from a host"
    assert mine.get("TPU", "peak FLOP/s") == "my own estimate"
    assert mine.get("LPU", "KV-cache strategy") == "SRAM across the chips"
    assert mine.merge(other) == (0, conflicts)  # merging again changes nothing


@pytest.mark.parametrize("course", sorted(ATTRIBUTES))
def test_each_course_rebuilds_exactly_its_declared_rows(course):
    rows = course_rows(course)
    cells = {(s, a) for s, a, _, _ in rows}
    assert cells == {(s, a) for a in ATTRIBUTES[course] for s in SYSTEMS}  # one row per system and attribute
    assert len(rows) == len(cells)
    assert {src for *_, src in rows} <= {"catalog", "simulated"}  # never a learner's row


def test_rebuild_counts_after_each_course_and_never_touches_what_is_there(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    lm.add("GPU", "decode step latency (s)", 42.0, course=1, source="measured")  # the learner's own number
    lm.add("Spyre", "execution model", "bundles of fused ops", course=1, source="learner")
    counts = []
    for course in sorted(ATTRIBUTES):
        rebuild(lm, [course])
        counts.append(len(lm))
    per_course = [len(ATTRIBUTES[c]) * len(SYSTEMS) for c in sorted(ATTRIBUTES)]
    assert counts[-1] == sum(per_course) + 1  # every rebuildable cell, plus the learner's description
    assert counts[0] == per_course[0] + 1  # Course 1 filled 19 cells around the measured one
    assert lm.get("GPU", "decode step latency (s)") == 42.0
    assert lm.get("Spyre", "execution model") == "bundles of fused ops"
    assert all(not missing(lm, c) for c in ATTRIBUTES)
    assert fill_course(lm, 3) == 0 and rebuild(lm, range(1, 7)) == {}  # nothing left to add


def test_open_map_shares_one_file_rebuilds_earlier_courses_and_merges_an_old_local_map(shared, capsys):
    old = LandscapeMap("landscape_map.json")  # what an earlier release wrote next to the notebook
    old.add("WSE", "execution model", "layers placed across the wafer", course=1, source="learner")
    old.save()
    lm = open_map(5)
    out = capsys.readouterr().out
    assert lm.path == shared
    assert "1 cells merged in" in out and "Course 1: 20 cells" in out and "Course 4: 20 cells" in out
    assert all(not missing(lm, c) for c in (1, 2, 3, 4)) and missing(lm, 5)  # the lab adds its own course
    assert lm.get("WSE", "execution model") == "layers placed across the wafer"
    assert len(lm) == 55 + 1  # 20 + 10 + 5 + 20 rebuilt cells and the learner's row: never an empty map
    fill_course(lm, 5)  # what Lab 5 adds of its own course
    lm.save()
    again = open_map(6)  # the next lab, from another folder, opens the same file
    assert again.rows == lm.rows and "rebuilt" not in capsys.readouterr().out
    assert (shared.parent / "landscape_map.json").is_file()
    assert old.path.read_text()  # the old file is left as it was


def test_open_map_with_a_path_reads_only_that_file(shared, tmp_path):
    old = LandscapeMap("landscape_map.json")
    old.add("GPU", "execution model", "kernels launched by a host", course=1, source="learner")
    old.save()
    lm = open_map(1, tmp_path / "mine.json")
    assert lm.path == tmp_path / "mine.json" and len(lm) == 0  # Course 1 has no earlier course to rebuild
    assert not shared.exists()


def test_a_scratch_map_for_grading_is_fresh_and_rebuilds_nothing(shared, tmp_path):
    LandscapeMap(shared).save()
    old = LandscapeMap("landscape_map.json")
    old.add("GPU", "execution model", "kernels launched by a host", course=1, source="learner")
    old.save()
    lm = open_map(6, scratch=True)  # the autograder's run of Lab 6: no learner map read, no simulation
    assert len(lm) == 0 and lm.path != shared and lm.path.parent != shared.parent
    given = open_map(3, tmp_path / "ci.json", scratch=True)
    assert given.path == tmp_path / "ci.json" and len(given) == 0


def test_export_writes_the_whole_map_as_png_and_csv(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    rebuild(lm, [4, 6])
    lm.add("GPU", "a hang surfaces as", "a watchdog timeout in NCCL", course=5, source="learner")
    png, csv_path = lm.export(tmp_path / "out")
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    with csv_path.open(newline="", encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    assert len(lines) == len(lm) == 36
    assert list(lines[0]) == ["course", "attribute", "system", "value", "source"]
    assert [int(r["course"]) for r in lines] == sorted(int(r["course"]) for r in lines)
    assert [r["system"] for r in lines[:5]] == list(SYSTEMS)  # the figure's column order, not the alphabet's
    assert {(r["system"], r["attribute"]) for r in lines} == {(r["system"], r["attribute"]) for r in lm.rows}


def test_colab_helpers_do_nothing_off_colab(shared, capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert keep_on_drive() is None and upload_map() is None
    assert download_map() == shared
    out = capsys.readouterr().out
    assert out.count("not on Colab") == 3 and not shared.exists()
    import os

    assert "DFA_LANDSCAPE" not in os.environ


def test_keep_on_drive_merges_the_session_map_into_drive_and_points_the_labs_there(shared, tmp_path, monkeypatch):
    drive_root = tmp_path / "drive"
    mounted = []
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=lambda where: mounted.append(where))
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr("common.landscape.store.DRIVE_MOUNT", str(drive_root))
    monkeypatch.delenv("DFA_LANDSCAPE", raising=False)
    kept = LandscapeMap(drive_root / "MyDrive" / "dataflow-labs" / "landscape_map.json")
    kept.add("GPU", "fusion boundaries", "one kernel per fusion, host launched", course=2, source="learner")
    kept.save()
    session = LandscapeMap(shared)
    session.add("GPU", "fusion boundaries", "a newer text from this session", course=2, source="learner")
    session.add("TPU", "fusion boundaries", "one matmul per fusion with epilogues", course=2, source="learner")
    session.save()
    target = keep_on_drive()
    assert mounted == [str(drive_root)] and target == kept.path
    import os

    assert os.environ["DFA_LANDSCAPE"] == str(target) and LandscapeMap.default_path() == target
    on_drive = LandscapeMap.load(target)
    assert on_drive.get("GPU", "fusion boundaries") == "one kernel per fusion, host launched"  # Drive's kept
    assert on_drive.get("TPU", "fusion boundaries") == "one matmul per fusion with epilogues"  # session's added


def _lab_text(course_glob: str) -> str:
    from pathlib import Path

    (path,) = Path(__file__).resolve().parents[1].glob(f"{course_glob}/source/lab*/lab*.py")
    return path.read_text()


def test_the_rebuilt_rows_use_each_labs_learner_defaults():
    """A rebuilt row is the row an untouched lab adds: same model, sizes and chips as its parameters."""
    import re

    from common.landscape import courses as lc

    lab1, lab2, lab3 = _lab_text("course1_*"), _lab_text("course2_*"), _lab_text("course3_*")
    lab4, lab6 = _lab_text("course4_*"), _lab_text("course6_*")
    assert f'LLM_NAME = "{lc.LAB1_MODEL}"' in lab1 and re.search(rf"^DECODE_SEQ = {lc.LAB1_SEQ}\b", lab1, re.M)
    assert f"D_MODEL = {lc.LAB2_BLOCK[0]} " in lab2 and f"N_HEADS = {lc.LAB2_BLOCK[1]}\n" in lab2
    assert f"else {lc.LAB2_INPUT[:2]}" in lab2 and lc.LAB2_INPUT[2] == lc.LAB2_BLOCK[0]
    assert f'MODEL = "{lc.LAB3_MODEL}"' in lab3 and f"SIM_SEQ = 16 if FAST else {lc.LAB3_SEQ}" in lab3
    assert f'MODEL = "{lc.LAB4_MODEL}"' in lab4 and f"CONTEXT = {lc.LAB4_CONTEXT}\n" in lab4
    assert f'MODEL = "{lc.LAB6_MODEL}"' in lab6 and f"else {lc.LAB6_SEQ} " in lab6
    assert f"DTYPES = {lc.LAB6_DTYPES!r}".replace("'", '"') in lab6
