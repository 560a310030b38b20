"""NVIDIA's CUB itself as the benchmarks' baseline, from Python: ``cuda.compute`` (package ``cuda-cccl``).

``torch.cumsum`` and ``torch.sort`` call CUB too, but through torch's own dispatch, allocator and
tuning; ``cuda.compute`` builds CUB's device-wide algorithms (``DeviceScan``, ``DeviceRadixSort``,
``DeviceSelect``, ``DeviceSegmentedReduce``) for this GPU and calls them directly. Each builder
here follows CUB's two-phase contract as a C++ caller would: the algorithm is built once, its
temporary storage asked for (a call with ``temp_storage=None`` returns the bytes) and allocated
once, and the returned ``call()`` only launches, the fair twin of the workspace our calls keep.

Operators: the built-in ``OpKind.PLUS`` for the scans; a predicate for ``select`` and a user
operator are C++ device functions compiled by NVRTC to LTO-IR (``cuda.compute.op.RawOp``), the
path ``cuda.compute`` offers for pre-compiled operators. (Its other path, a Python callable
compiled by ``numba-cuda-mlir``, needs a 71 MB wheel that does not fit the GPU machine's 64 MiB
of carried files.)

Every function takes device arrays with ``__cuda_array_interface__`` (numba's, CuPy's or torch's)
and returns ``call()``, which queues the work on the default stream and returns without waiting;
the scripts build through :func:`attempt`.
:func:`load` returns None where ``cuda.compute`` cannot run (not installed: it is in the
``bench`` extra only; the simulator), and the scripts then skip CUB's rows with a note.
"""

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def load():
    """The ``cuda.compute`` module, or None (with a line saying why) where it cannot run."""
    from prefixsum.core.device import simulating

    if simulating():
        print("CUB (cuda.compute): skipped (the CUDA simulator: no GPU for it; its rows are not faked)")
        return None
    try:
        import cuda.compute as compute
    except Exception as error:  # not installed (the bench extra), or no working CUDA for it
        print(f"CUB (cuda.compute): skipped ({type(error).__name__}: {error})")
        return None
    if not getattr(compute, "_BINDINGS_AVAILABLE", True):
        print("CUB (cuda.compute): skipped (its CUDA bindings are not available)")
        return None
    return compute


def attempt(what, build):
    """``build()`` (a ``call`` of this module), or None with a line saying why: where ``cuda.compute``
    cannot run, or this build fails, CUB's row is left out and the run goes on (an optional
    baseline never stops a benchmark, as :func:`prefixsum.cli.timing.gpu_library` has it)."""
    if load() is None:
        return None
    try:
        return build()
    except Exception as error:  # cuda.compute's builds raise their own errors (NVRTC, nvJitLink, bindings)
        print(f"CUB {what}: skipped ({type(error).__name__}: {(str(error).splitlines() or [''])[0]})")
        return None


def _temp(nbytes):
    from numba import cuda

    return cuda.device_array(max(int(nbytes), 1), np.uint8)


def scan(x, y, inclusive=True):
    """``call()``: CUB's ``DeviceScan::InclusiveSum`` (or ``ExclusiveSum``) of ``x`` into ``y``."""
    compute = load()
    plus = compute.OpKind.PLUS
    n = x.shape[0]
    if inclusive:
        built = compute.make_inclusive_scan(d_in=x, d_out=y, op=plus, init_value=None)
        init = None
    else:
        init = np.zeros(1, np.dtype(x.dtype))
        built = compute.make_exclusive_scan(d_in=x, d_out=y, op=plus, init_value=init)
    temp = _temp(built(temp_storage=None, d_in=x, d_out=y, op=plus, init_value=init, num_items=n))

    def call():
        built(temp_storage=temp, d_in=x, d_out=y, op=plus, init_value=init, num_items=n)

    return call


def radix_sort(keys, out_keys, values=None, out_values=None):
    """``call()``: CUB's ``DeviceRadixSort::SortKeys`` (or ``SortPairs``), ascending, input kept
    (CUB sorts through a buffer of its temporary storage, as ours does through scratch)."""
    compute = load()
    n = keys.shape[0]
    built = compute.make_radix_sort(
        d_in_keys=keys,
        d_out_keys=out_keys,
        d_in_values=values,
        d_out_values=out_values,
        order=compute.SortOrder.ASCENDING,
    )
    temp = _temp(
        built(
            temp_storage=None,
            d_in_keys=keys,
            d_out_keys=out_keys,
            d_in_values=values,
            d_out_values=out_values,
            num_items=n,
        )
    )

    def call():
        built(
            temp_storage=temp,
            d_in_keys=keys,
            d_out_keys=out_keys,
            d_in_values=values,
            d_out_values=out_values,
            num_items=n,
        )

    return call


@functools.lru_cache(maxsize=None)
def cpp_op(name, source):
    """``RawOp`` of the C++ device function ``name`` in ``source``, compiled by NVRTC to LTO-IR
    for this GPU (``extern "C" __device__ void name(void* a, ..., void* result)``)."""
    from cuda.compute.op import RawOp
    from cuda.core import Device, Program, ProgramOptions

    major, minor = Device().compute_capability
    options = ProgramOptions(
        arch=f"sm_{major}{minor}", relocatable_device_code=True, link_time_optimization=True, std="c++17"
    )
    return RawOp(ltoir=Program(source, "c++", options=options).compile("ltoir").code, name=name)


def positive(dtype):
    """The predicate ``x > 0`` on one element of ``dtype`` as a C++ ``RawOp`` (CUB's select's condition)."""
    ctype = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}[np.dtype(dtype).name]
    name = f"positive_{np.dtype(dtype).name}"
    source = (
        f'extern "C" __device__ void {name}(void* x, void* result) {{\n'
        f"  *static_cast<unsigned char*>(result) = *static_cast<{ctype}*>(x) > 0;\n}}\n"
    )
    return cpp_op(name, source)


def select(x, out, count, cond):
    """``call()``: ``cuda.compute.select``: the elements of ``x`` where ``cond`` holds, in order,
    into ``out``, their number into ``count[0]`` (``count``: two int64). ``cuda.compute`` runs it
    as CUB's ``DevicePartition`` three ways with the second part always empty, one pass with
    decoupled look-back as ``DeviceSelect::If``."""
    compute = load()
    n = x.shape[0]
    built = compute.make_select(d_in=x, d_out=out, d_num_selected_out=count, cond=cond)
    temp = _temp(built(temp_storage=None, d_in=x, d_out=out, d_num_selected_out=count, cond=cond, num_items=n))

    def call():
        built(temp_storage=temp, d_in=x, d_out=out, d_num_selected_out=count, cond=cond, num_items=n)

    return call


def segmented_sum(x, out, starts, ends):
    """``call()``: CUB's ``DeviceSegmentedReduce::Sum`` of ``x`` over segments ``starts[i] .. ends[i] - 1``
    into ``out[i]``: the CUB twin closest to a segmented scan, which CUB has no device-wide call for."""
    compute = load()
    plus = compute.OpKind.PLUS
    init = np.zeros(1, np.dtype(x.dtype))
    segments = out.shape[0]
    built = compute.make_segmented_reduce(
        d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends, op=plus, h_init=init
    )
    arguments = dict(
        d_in=x, d_out=out, num_segments=segments, start_offsets_in=starts, end_offsets_in=ends, op=plus, h_init=init
    )
    temp = _temp(built(temp_storage=None, **arguments))

    def call():
        built(temp_storage=temp, **arguments)

    return call
