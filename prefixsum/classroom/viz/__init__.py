"""Pictures of traces and benchmarks, drawn with matplotlib.

* :func:`dataflow`: who reads whom, phase by phase, in one array of one block (from a trace).
* :func:`launches`: which block writes which cells of each global array, launch by launch.
* :func:`steps`: who reads whom in one array over a whole run, one row per launch or phase.
* :func:`lookbacks`: how far each tile of a decoupled look-back looked back, and where it waited.
* :func:`step`: an interactive stepper over a trace, phase by phase (a widget; a picture where
  widgets are not); :func:`step_failure` opens it on the last failing check beside the package's scan.
* :func:`bank_conflicts`: passes per warp access instruction, for one or more traces.
* :func:`throughput`: GB/s against n from a benchmark CSV.
* :func:`shuffles`: which lane a warp shuffle reads from, step by step.
* :func:`taxonomy`: prefix networks by depth, work and fan-out (Kogge-Stone, Sklansky, ...).
* :func:`reflection`: a Householder reflection as a mirror, in two dimensions.
* :func:`sparsity`: a row of matrices coloured by magnitude, zeros blank (Householder steps).
* :func:`compaction`, :func:`radix_pass`, :func:`curves`: chapter 11's applications (a compaction
  and its scan, one split of a radix sort, lines such as a spline or errors against n).

Every function returns the matplotlib Axes (or Figure) it drew on, so a notebook can add to it.
"""

from .apps import compaction, curves, radix_pass
from .matrices import reflection, sparsity
from .plots import shuffles, taxonomy, throughput
from .step_pictures import difference_png
from .stepper import step, step_failure
from .traces import WARP_COLOURS, bank_conflicts, dataflow, launches, lookbacks, steps

__all__ = [
    "WARP_COLOURS",
    "bank_conflicts",
    "compaction",
    "curves",
    "dataflow",
    "launches",
    "lookbacks",
    "radix_pass",
    "reflection",
    "shuffles",
    "sparsity",
    "step",
    "step_failure",
    "steps",
    "taxonomy",
    "throughput",
    "difference_png",
]
