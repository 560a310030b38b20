"""ps.viz.step, the widget and its static fallback, and the grader's first-difference picture."""

import base64
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

import prefixsum as ps
from prefixsum.classroom import lookback_timeline, mutants, stepping, trace
from prefixsum.grading import report
from prefixsum.grading.runner import Row

CELL = re.compile(r'data-array="(\w+)" data-owner="([\d,]*)" data-index="(\d+)" data-value="([^"]*)"')


def drawn(board, array):
    """``{index: text}`` of the cells of ``array`` in the first board of the HTML (the student's)."""
    first = board.split("ps-reference")[0]
    return {int(i): v for a, _, i, v in CELL.findall(first) if a == array}


@pytest.fixture(scope="module")
def ladder():
    return trace.record(ps.scan, np.arange(1, 31, dtype=np.int32), algorithm="ladder", block_size=32)


def test_the_slider_and_buttons_move_through_the_phases(ladder):
    stepper = ps.viz.step(ladder)
    box = stepper.widget()
    (back, slider, forward), notes, board = box.children[0].children, box.children[1], box.children[2]
    assert "ps-stepper" in box._dom_classes and (slider.min, slider.max, slider.value) == (0, 6, 0)
    model = stepping.model(ladder)
    for k in range(len(model)):
        slider.value = k
        (values,) = [v for s, v in model[k].values.items() if s.array == "rungs"]
        assert drawn(board.value, "rungs") == {i: str(v) for i, v in enumerate(values)}
        assert model[k].label in notes.value
    slider.value = 1
    assert "rungs[1] = " in board.value and "written by thread 1 of block 0 at line" in board.value
    slider.value = 6
    forward.click()
    assert slider.value == 6  # stays at the last step
    back.click()
    assert slider.value == 5


def test_the_fallback_is_a_picture_and_one_line(ladder):
    stepper = ps.viz.step(ladder)
    bundle = stepper._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/png", "application/vnd.jupyter.widget-view+json"}
    assert bundle["text/plain"] == "<prefixsum stepper: ladder_tile, 7 steps by phase; launch 0 (ladder_tile), phase 0>"
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    ax = ps.viz.dataflow(ladder, array="rungs")
    given = ps.viz.step(ladder, fallback=ax)
    assert not plt.fignum_exists(ax.figure.number)  # closed: the notebook shows the stepper alone
    assert base64.b64decode(given._repr_mimebundle_()["image/png"]).startswith(b"\x89PNG")


def test_a_wrong_run_opens_at_its_first_difference_with_the_cells_marked():
    x = np.arange(1, 41, dtype=np.float32)
    good = trace.record(mutants._ladder_scan_tiles, mutants.correct_tile, x)
    bad = trace.record(mutants._ladder_scan_tiles, mutants.wrong_partner_tile, x)
    stepper = ps.viz.step(bad, reference=good)
    assert stepper.start == stepper.first_difference == 1
    assert "first difference from the reference at step 1" in repr(stepper)
    board = stepper.widget().children[2].value
    assert "ps-reference" in board and board.count('stroke="#d00000"') == len(stepper.differences[1]) > 0
    assert ps.viz.step(good, reference=good).first_difference is None


def test_a_failing_check_offers_the_stepper_on_its_run():
    verdict = ps.check.tiled(mutants.wrong_partner_tile, block_size=mutants.BLOCK)
    assert not verdict and str(verdict).endswith("Step through it beside the package's scan: ps.viz.step_failure()")
    stepper = ps.viz.step_failure(block_size=mutants.BLOCK)
    assert stepper.first_difference is not None and stepper.model.trace.kernel(0) == "wrong_partner_tile"
    big = ps.check.scan(lambda x: ps.scan(x) * 0, dtype=np.int32, sizes=(100,))
    assert "step_failure" not in str(big)  # too many elements to step through


def test_the_look_back_steps_by_publication():
    with ps.sim.resident_blocks(8):
        run = trace.record(
            ps.scan, np.ones(32 * 12, dtype=np.float32), algorithm="lookback", block_size=32, items_per_thread=1
        )
    stepper = ps.viz.step(run, by="time")
    tiles = lookback_timeline.timeline(run)
    assert stepper._count() == sum(len(t.published) for t in tiles)
    last = stepper._board(stepper._count() - 1)
    assert re.findall(r'data-tile="(\d+)" data-published="(\d+)"', last) == [
        (str(t.tile), str(sum(p <= stepper.times[-1] for p in t.published))) for t in tiles
    ]
    assert "look-back of 12 tiles" in repr(stepper)
    with pytest.raises(ValueError, match="by='time' shows one run"):
        ps.viz.step(run, run, by="time")


def test_the_feedback_shows_the_first_difference_as_a_picture(tmp_path):
    x = np.arange(1, 41, dtype=np.float32)
    good = trace.record(mutants._ladder_scan_tiles, mutants.correct_tile, x)
    bad = trace.record(mutants._ladder_scan_tiles, mutants.wrong_partner_tile, x)
    rows = [Row("ann", "01_ladder.ipynb", "01.ladder-step", 0, 2, "fail", "race at n=1", "code")]
    paths = report.write_all(rows, tmp_path, runs={("ann", "01.ladder-step"): (bad, good)})
    page = paths[-1].read_text()
    assert "![the first step where your run leaves the reference](ann_01.ladder-step.png)" in page
    assert (tmp_path / "feedback" / "ann_01.ladder-step.png").read_bytes().startswith(b"\x89PNG")
    assert ps.viz.difference_png(good, good, tmp_path / "same.png") is None and not (tmp_path / "same.png").exists()
