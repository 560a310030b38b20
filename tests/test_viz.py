"""The pictures: they draw what the trace says (arrows counted), and every plot function runs."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

import prefixsum as ps  # noqa: E402
from prefixsum import viz  # noqa: E402


def arrows(ax):
    return sum(len(c.get_segments()) for c in ax.collections if hasattr(c, "get_segments"))


def test_ladder_dataflow_has_one_arrow_per_read():
    run = ps.trace.record(ps.scan, np.arange(1, 9, dtype=np.int32), algorithm="ladder", block_size=32)
    ax = viz.dataflow(run, array="rungs")
    # 5 phases over 32 lanes, 16 working threads each reading two cells: 5 * 16 * 2
    assert arrows(ax) == 5 * 16 * 2
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "load",
        "phase 1",
        "phase 2",
        "phase 3",
        "phase 4",
        "phase 5",
    ]


def test_reads_before_a_barrier_feed_the_next_write():
    """Folding reads in one barrier phase and writes in the next: the picture must join them.

    In the phase with stride p (16, 8, 4, 2, 1) every lane t keeps its own cell and lanes
    t >= p add cell t - p, so row r has exactly the arrows t -> t and t - p -> t from row r - 1.
    """
    run = ps.trace.record(ps.scan, np.arange(1, 33, dtype=np.float32), reverse=True, algorithm="folding", block_size=32)
    assert {r.array for r in run.records if r.space == "shared"} == {"cells"}
    ax = viz.dataflow(run, array="cells")
    expected = set()
    for row, p in enumerate((16, 8, 4, 2, 1), start=1):
        expected |= {((t, row - 1), (t, row)) for t in range(32)}
        expected |= {((t - p, row - 1), (t, row)) for t in range(p, 32)}
    drawn = [
        tuple(map(tuple, segment.tolist()))
        for c in ax.collections
        if hasattr(c, "get_segments")
        for segment in c.get_segments()
    ]
    assert len(drawn) == len(expected) == 5 * 32 + 16 + 24 + 28 + 30 + 31
    assert set(drawn) == expected
    assert [t.get_text() for t in ax.get_yticklabels()] == ["load"] + [f"phase {2 * k}" for k in range(1, 6)]
    assert ax.get_title() == "folding_tile: cells, block 0" and ax.get_xlabel() == "cells[i]"


def test_launches_and_bank_conflicts_and_throughput_draw(tmp_path):
    run = ps.trace.record(ps.scan, np.arange(100, dtype=np.float32), algorithm="ladder", block_size=32)
    assert len(viz.launches(run).get_yticklabels()) == 5
    assert len(viz.bank_conflicts({"ladder": run}).patches) == 2
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("variant,n,gbps\na,1024,1.5\na,2048,3.0\nb,1024,2.0\n")
    assert len(viz.throughput(str(csv_path)).get_lines()) == 2


def test_taxonomy_places_traced_and_formula_networks():
    points = {
        "a": {"depth": 7, "work": 192, "fan_out": 32, "measured": True},
        "b": {"depth": 8, "work": 143, "fan_out": 16, "measured": False},
    }
    ax = viz.taxonomy(points)
    assert len(ax.collections) == 2 and len(ax.texts) == 2
    assert "fan-out 32" in ax.texts[0].get_text()


def test_fan_out_counts_readers_of_one_cell_in_one_step():
    run = ps.trace.record(ps.scan, np.ones(32, dtype=np.int32), algorithm="ladder", block_size=32)
    assert run.fan_out() == 16  # the last phase: lanes 16-31 all read lane 15


def test_compaction_draws_one_line_per_kept_element():
    ax = viz.compaction(list(range(8)), [1, 0, 0, 1, 1, 0, 1, 0])
    assert arrows(ax) == 4


def test_radix_pass_moves_every_key_once_zeros_first():
    ax = viz.radix_pass([5, 2, 7, 4], 0)
    assert arrows(ax) == 4
    texts = [t.get_text() for t in ax.texts]
    assert texts[5:9] == ["0010", "0100", "0101", "0111"]  # after the 4 keys and their row title


def test_curves_draws_each_series():
    ax = viz.curves(np.arange(4), {"a": np.ones(4), "b": np.arange(4)}, points=([0, 1], [0, 1]), logy=True)
    assert len(ax.lines) == 3
