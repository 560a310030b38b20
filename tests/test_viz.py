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
    assert [t.get_text() for t in ax.get_yticklabels()] == ["load", "phase 1", "phase 2", "phase 3", "phase 4", "phase 5"]


def test_reads_before_a_barrier_feed_the_next_write():
    run = ps.trace.record(ps.scan, np.arange(1, 33, dtype=np.float32), reverse=True, algorithm="folding", block_size=32)
    name = sorted({r.array for r in run.records if r.space == "shared"})[0]
    assert arrows(viz.dataflow(run, array=name)) > 0


def test_launches_and_bank_conflicts_and_throughput_draw(tmp_path):
    run = ps.trace.record(ps.scan, np.arange(100, dtype=np.float32), algorithm="ladder", block_size=32)
    assert len(viz.launches(run).get_yticklabels()) == 5
    assert len(viz.bank_conflicts({"ladder": run}).patches) == 2
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("variant,n,gbps\na,1024,1.5\na,2048,3.0\nb,1024,2.0\n")
    assert len(viz.throughput(str(csv_path)).get_lines()) == 2
