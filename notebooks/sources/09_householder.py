# ---
# jupyter:
#   jupytext:
#     formats: ipynb,sources//py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Householder tridiagonalization and the symmetric solve
#
# The [handwritten notes on tridiagonal solvers](../docs/references.md#tridiagonal-solvers-handwritten-notes)
# have two parts: ① parallel cyclic reduction
# (PCR, chapter 07) and ② *"Householder reduction → tridiagonal decomposition of any symmetric
# matrix"*. Part ② turns a symmetric matrix $A$ into $A = Q T Q^T$ with $Q$ orthogonal and $T$
# symmetric tridiagonal, by a sequence of reflections ([Householder 1958](../docs/references.md#householder-1958)),
# in the order of the classic `tred2` routine
# ([Martin, Reinsch and Wilkinson 1968](../docs/references.md#martin-reinsch-and-wilkinson-1968)): from the
# last row upward. Then $A x = b$ becomes a tridiagonal system, which part ①
# solves. This chapter follows the notes: a reflection as a mirror, one reduction step on a
# $5 \times 5$ matrix, the kernel with several matrices per block (the notes'
# `tidx = threadIdx.x % n`), the solve $Q T Q^T x = b$, and measurements on a GPU against
# PyTorch (section 6). Every work cited is on the [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import math

import numpy as np
from numba import cuda

print(ps.device_info())

# %%
# What the chapter reads and shows besides its exercises (the exercises' setup above holds no module
# object but by an import, so that the grader's allow-list knows every module a submission could name).
import importlib
import inspect

from prefixsum.cli import results

hh = importlib.import_module("prefixsum.tridiag.householder")  # the module (ps.tridiag.householder is the function)

# %% [markdown]
# ## 1. A reflection is a mirror
#
# The notes start from the Householder matrix $P = I - 2 w w^T$ with $|w| = 1$, or with any
# non-zero $u$:
#
# $$P = I - \frac{u u^T}{H}, \qquad H = \tfrac12 |u|^2 .$$
#
# $P$ is symmetric, and the notes check that it is its own inverse:
# $P^2 = I - \frac{2 u u^T}{H} + \frac{u (u^T u) u^T}{H^2} = I$, so $P^T = P = P^{-1}$: it is
# orthogonal. Applied to $x$, it subtracts twice the component of $x$ along $u$:
# $P x = x - u \, \frac{u \cdot x}{H}$. That is the **mirror image** of $x$ in the hyperplane
# orthogonal to $u$ (a line, in two dimensions).
#
# The reduction needs a mirror that sends a given $x$ onto a unit vector $e$. A mirror keeps
# lengths, so the image is $g e$ with $g = \pm |x|$, and the mirror must bisect $x$ and $g e$:
# $u = x - g e$. In `tred2`'s notation, with $f = x \cdot e$ the entry of $x$ along $e$:
#
# $$h = |x|^2, \qquad g = -\operatorname{sign}(f) \sqrt{h}, \qquad u = x - g e, \qquad H = \tfrac12|u|^2 = h - f g .$$
#
# Only one entry of $u$ differs from $x$: $f - g$. The notes write *"$g = \pm\sqrt{h}$, the sign
# depends on $f$"* (translated): with $g$ of the opposite sign to $f$, $f - g = f + \operatorname{sign}(f)|x|$
# adds two magnitudes. The other sign is just as good a mirror on paper, but when $x$ is
# nearly parallel to $e$ it computes $u$'s entry and $H$ as differences of nearly equal numbers.
# In two dimensions, with $e = (0, 1)$: the numbers for $x = (3, 4)$, and the picture: $x$, the
# mirror (orthogonal to $u$), and the image on the circle of radius $|x|$. $u = x - P x$ joins
# the two tips, and the mirror cuts it in half. In the middle and on the right, an $x$ close to
# $e$: with `tred2`'s sign the mirror is well away from $x$; with the other sign the image lands
# next to $x$, and $u$ is a short difference of long vectors.

# %%
e2 = np.array([0.0, 1.0])


def mirror(x, g):
    """u and H of the reflector that sends x to g e2, and P x."""
    u = x - g * e2
    H = float(x @ x) - x[1] * g
    return u, H, x - u * (u @ x) / H


x = np.array([3.0, 4.0])
g = -np.sign(x[1]) * np.linalg.norm(x)
u, H, image = mirror(x, g)
print(f"x = {x}: h = {x @ x:g}, f = {x[1]:g}, g = {g:g}, u = {u}, H = {H:g}, P x = {image.round(12) + 0.0}")
x_near = np.array([0.6, 2.5])
norm_near = np.linalg.norm(x_near)
_ = ps.viz.reflection([x, x_near, x_near], [x + 5 * e2, x_near + norm_near * e2, x_near - norm_near * e2],
                      titles=["x = (3, 4): g = -5", "x near e: g = -sign(f) |x|", "x near e: the other sign, g = +|x|"],
                      labels=("x[0]", "x[1]  (along e)"))

# %% [markdown]
# In float32 the other sign is not just less accurate: for $x = (10^{-4}, 1)$, $|x|$ rounds to
# 1, so $f - g = 0$, $H = 0$ and there is no reflector at all.

# %%
x32 = np.array([1e-4, 1.0], np.float32)
h32, f32 = x32 @ x32, x32[1]
for label, g32 in (("g = -sign(f) sqrt(h)", -np.sqrt(h32)), ("g = +sign(f) sqrt(h)", np.sqrt(h32))):
    print(f"{label}: last entry of u = f - g = {f32 - g32:g}, H = h - f g = {h32 - f32 * g32:g}")

# %% [markdown]
# ## 2. One step at a time on a 5 × 5 matrix
#
# `tred2` reduces rows from the **last one upward**. Before step $i$ ($i = n-1, \dots, 2$), rows
# and columns $i+1, \dots, n-1$ are already tridiagonal. Step $i$ takes $x = A[i, 0{:}i]$, the
# part of row $i$ left of the diagonal, and builds a reflector on indices $0, \dots, i-1$ with
# $e = e_{i-1}$, so that $P x = g e_{i-1}$: row $i$ keeps one entry left of the diagonal,
# $T[i, i-1] = g$, and by symmetry so does column $i$. The notes' order of computation is
# $g, u, H, p, K, q, A'$:
#
# $$p = \frac{A u}{H}, \qquad K = \frac{u \cdot p}{2H}, \qquad q = p - K u, \qquad A' = P A P = A - q u^T - u q^T .$$
#
# The notes derive the last one: $PAP = A - p u^T - u p^T + 2K u u^T$, and the two $K$ terms
# fold into $q$. A rank-2 update of $O(n^2)$ operations instead of two matrix products of
# $O(n^3)$. (`tred2` also divides $x$ by $\mathrm{scale} = \sum_k |x_k|$ first, so that $h$
# cannot overflow or underflow; $u$ and $H$ scale together and $P$ does not change, so the
# numpy version below leaves it out. The kernel does it.)
#
# In numpy, one step and the whole loop, on a small matrix with integer entries. Each step zeroes
# row $i$ and column $i$ left of (and above) the sub-diagonal: in the picture the framed cells
# are the ones the step just zeroed, blank cells are zero (up to rounding), and colours are
# $\log_{10}|a|$.

# %%
def householder_step(A, i):
    """The notes' step i on a numpy matrix: returns P A P and the reflector P."""
    n = len(A)
    x = A[i, :i]
    h = x @ x
    f = x[-1]
    g = -np.sqrt(h) if f >= 0 else np.sqrt(h)
    u = np.zeros(n)
    u[:i] = x
    u[i - 1] = f - g  # u = x - g e_{i-1}
    H = h - f * g
    p = A @ u / H
    K = u @ p / (2 * H)
    q = p - K * u
    return A - np.outer(q, u) - np.outer(u, q), np.eye(n) - np.outer(u, u) / H


rng = np.random.default_rng(1)
A5 = rng.integers(1, 5, size=(5, 5)) * rng.choice([-1, 1], size=(5, 5))
A5 = (np.tril(A5) + np.tril(A5, -1).T).astype(np.float64)  # symmetric, no zero entries
steps, reflectors, zeroed = [A5], [], [None]
for i in range(4, 1, -1):
    after, P = householder_step(steps[-1], i)
    steps.append(after)
    reflectors.append(P)
    just = np.zeros((5, 5), bool)
    just[i, :i - 1] = just[:i - 1, i] = True
    zeroed.append(just)
print("A =\n", A5)
_ = ps.viz.sparsity(steps, ["A", "after step i = 4", "after step i = 3", "after step i = 2: T"], highlight=zeroed)

# %% [markdown]
# After the three steps $T = P_2 P_3 P_4 \, A \, P_4 P_3 P_2$, so $Q = P_4 P_3 P_2$ (the
# notes, numbering the reflectors in the order they are applied: *"$A'' = P_2 A' P_2 = P_2 P_1
# A P_1 P_2$"*, *"tridiag $A = Q' A Q$"*). Step $i = 1$ would reflect a single entry onto
# itself: nothing to do. The package's `householder` does the same on the GPU (the simulator
# here) and returns $T$ as its diagonal $d$ and sub-diagonal $e$, with $Q$:

# %%
T5 = steps[-1]
print("T =\n", np.where(np.abs(T5) < 1e-12, 0.0, T5).round(3) + 0.0)
Q5 = reflectors[0] @ reflectors[1] @ reflectors[2]
print("numpy steps: Q^T A Q = T:", np.allclose(Q5.T @ A5 @ Q5, T5, rtol=0, atol=1e-12),
      "| T tridiagonal:", np.allclose(np.tril(T5, -2), 0, rtol=0, atol=1e-12))
d5, e5, Qp = ps.tridiag.householder(A5)
Tp = np.diag(d5) + np.diag(e5, 1) + np.diag(e5, -1)
print("package: Q^T A Q = tridiag(e, d, e) within 1e-12:", np.allclose(Qp.T @ A5 @ Qp, Tp, rtol=0, atol=1e-12))
print("package and numpy steps agree (d, e, Q within 1e-12):",
      all(np.allclose(a, b, rtol=0, atol=1e-12) for a, b in ((d5, np.diag(T5)), (e5, np.diag(T5, -1)), (Qp, Q5))))

# %% [markdown]
# Same sign convention, same $T$ and $Q$. (Other libraries may differ in the signs of $e$
# and of $Q$'s columns, or reduce from the first row down and get another $T$ altogether; the
# eigenvalues are the same.)
#
# ## 3. The reduction on the GPU
#
# ### 3.1 Who does what
#
# The notes give one matrix $n$ threads (*"tidx = threadIdx.x % d"*). In the package a thread
# owns **column** `tidx` of its matrix and does everything that writes it; by symmetry column
# $j$ is also row $j$, and the threads of a matrix then touch consecutive addresses
# (`w[k, tidx]`): consecutive banks in shared memory (section 3.2 counts what happens between
# the matrices that share a warp), coalesced in global memory. A step has four phases between
# barriers:
#
# 1. `reflector`: the thread owning row $i$ scales $x$, computes $h, f, g$, stores $u$ in row
#    $i$ (the notes: *"`sAds[nt + i*n + l] = f - g` // store u"*), $H$ in `hs[i]`, and
#    $T[i, i-1] = \mathrm{scale} \cdot g$ (the notes' *"`s[gb_index_x*n + i] = scale*g`"*);
# 2. `project`: every thread $j < i$ computes $p_j = (A u)_j / H$;
# 3. `correct`: the owner of row $i$ computes $K$ and turns $p$ into $q$ (in the global-memory
#    path, one matrix per block, the whole block shares phases 1 and 3: section 6);
# 4. `update`: every thread $j < i$ updates its column of $A - q u^T - u q^T$.
#
# Phases 1 and 3 are serial: one thread sums over $i$ entries while the others wait at the next
# barrier. Section 6 comes back to that.
#
# Afterwards `accumulate` (`tred2`'s second loop) turns the $u$ vectors left in rows
# $1, \dots, n-1$ into $Q$, in place, applying the reflectors from the smallest block outward:
# $Q_{\text{block}} \leftarrow Q_{\text{block}} - u \, (u^T Q_{\text{block}}) / H$, one column per
# thread again. Row and column $n-1$ are never touched by a reflector: they stay those of the
# identity. The device functions and the kernel that strings them together follow.
#
# `reflector` and `update` are exercises 09.householder-reflector and 09.rank-two-update; the instructor's version prints the package's code here.

# %%
for device_function in (hh.project, hh.correct, hh.reduce_rows, hh.accumulate, hh.tridiagonalize):
    print(inspect.getsource(device_function))

# %% tags=["instructor"]
for device_function in (hh.reflector, hh.update):
    print(inspect.getsource(device_function))

# %% [markdown]
# ### 3.2 Several matrices per block
#
# A matrix of $n = 5$ needs only 5 threads, far too few for a block. The notes put several
# matrices in one block: *"tidx = threadIdx.x % d; Qt = (threadIdx.x - tidx)/d;
# gbx = Qt + blockIdx.x * (blockDim.x/d)"*. The shared-memory kernel does exactly that (`slot`
# is the notes' `Qt`, `matrix` their `gbx`), and cuts the block's dynamic shared memory into one
# $n \times (n+2)$ piece per matrix: the matrix, $p$ and the $H$ values.
#
# The host picks `per_block`: as many matrices as fit into 256 threads and 48 KiB of shared
# memory. The tracer records the real launches, checks every shared-memory access for races,
# and counts the barriers each thread passes: $4(n-1)$ in the reduction and $n-1$ in the
# accumulation, $5(n-1)$ in all. `householder` launches three kernels (the symmetry check,
# the reduction, and one that copies $T$'s off-diagonal out); the cell picks the reduction by
# its name and counts its barriers alone. Last, who is who in the second block of the $n = 5$
# run, which holds the matrices that did not fit into the first: its slots past the last matrix
# have no matrix, and their threads only pass the barriers.

# %%
print(inspect.getsource(hh.tridiagonalize_shared))
launches = {}
for n_traced, batch_traced in ((5, 60), (16, 20)):
    sample = np.random.default_rng(n_traced).normal(size=(batch_traced, n_traced, n_traced))
    run = ps.trace.record(ps.tridiag.householder, (sample + sample.transpose(0, 2, 1)) / 2)
    launch = launches[n_traced] = next(found for found in run.launches if found.kernel == "tridiagonalize_shared")
    barriers = max(phase for (number, _, _), phase in run.barriers_passed().items() if number == launch.number)
    print(f"n = {n_traced:2d}, {batch_traced} matrices: {launch.kernel}, {launch.grid[0]} blocks of {launch.block[0]} threads "
          f"({launch.block[0] // n_traced} matrices each), {barriers} barriers, 5 (n - 1) = {5 * (n_traced - 1)}; "
          f"in the whole run {len(run.races())} races, {len(run.uninitialized_reads())} uninitialized reads")
    print(f"        the other launches: {', '.join(found.kernel for found in run.launches if found is not launch)}")
print()
per_block_5 = launches[5].block[0] // 5
for thread in (0, 1, 4, 5, 6, 44, 45, 254):
    tidx, slot = thread % 5, thread // 5
    matrix = 1 * per_block_5 + slot
    print(f"block 1, threadIdx.x = {thread:3d}: tidx = {tidx}, slot (Qt) = {slot:2d}, matrix (gbx) = {matrix:3d}"
          + ("" if matrix < 60 else "  (no matrix: passes the barriers only)"))

# %% [markdown]
# **Bank conflicts between matrices.** Within a matrix the threads read `w[k, tidx]`,
# consecutive words on consecutive banks. But a warp of 32 threads holds two matrices of
# $n = 16$, and each matrix's slice of shared memory is $n(n+2) = 288$ words long, a multiple
# of 32: thread `tidx` of the second matrix lands on the same bank as thread `tidx` of the
# first. The remedy is padding: `slot_stride` moves the slices apart so that their starts
# differ by $n$ modulo 32; then the warp's threads `slot * n + tidx` cover 32 different banks,
# as if the two matrices were one. The padding costs $(n - n(n+2)) \bmod 32$ words per matrix,
# which the host subtracts from the 48 KiB when it picks `per_block`.
#
# The tracer counts the passes that every warp-wide shared-memory access needs (1 =
# conflict-free), for the kernel launched on two float32 matrices in one block (one warp), with
# the slices unpadded and padded as `householder` launches it, by the device function that makes
# the access. It takes the $k$-th access of each thread to one source line as one instruction of the
# warp; `by_phase=True` counts $k$ within each barrier phase, because here the threads of a warp
# join the loops at different steps (the owner of row $i$, the columns $j < i$), and pairing
# over the whole launch would pair accesses of different steps.

# %%
print(inspect.getsource(hh.slot_stride))


def reduce_shared(A, stride):
    """Launch tridiagonalize_shared on a (count, n, n) host array, all matrices in one block, slices stride apart."""
    count, n, _ = A.shape
    q, d, sub = (cuda.device_array(shape, A.dtype) for shape in ((count, n, n), (count, n), (count, n)))
    shared = ((count - 1) * stride + n * (n + 2)) * A.dtype.itemsize
    hh.tridiagonalize_shared[1, count * n, 0, shared](cuda.to_device(A), q, d, sub, count, stride)
    return q.copy_to_host()


LINES = {function.__name__: range(start, start + len(source))
         for function in (hh.load, hh.reflector, hh.project, hh.correct, hh.update, hh.accumulate,
                          hh.tridiagonalize, hh.tridiagonalize_shared)
         for source, start in [inspect.getsourcelines(function)]}


def function_of(line):
    """The device function (or kernel) whose source holds ``line`` of householder_kernels.py."""
    for name, lines in LINES.items():
        if line in lines:
            return name
    raise ValueError(f"line {line} is in none of {list(LINES)}")


M = np.random.default_rng(16).normal(size=(2, 16, 16))
A_banks = ((M + M.transpose(0, 2, 1)) / 2).astype(np.float32)
strides = {"unpadded": 16 * 18, "padded": hh.slot_stride(16)}
per_function = {}  # (function, label): [warp accesses, passes, worst]
for label, stride in strides.items():
    for found in ps.trace.record(reduce_shared, A_banks, stride).bank_conflicts(by_phase=True):
        tally = per_function.setdefault((function_of(found["line"]), label), [0, 0, 0])
        tally[0], tally[1], tally[2] = tally[0] + 1, tally[1] + found["ways"], max(tally[2], found["ways"])
functions = list(dict.fromkeys(name for name, _ in per_function))
print(f"{'':<21} {'warp accesses':>13} | " + " | ".join(f"{f'{label}, stride {stride}':^27}" for label, stride in strides.items()))
print(f"{'':<21} {'':>13} | " + " | ".join(f"{'passes':>12} {'the worst':>14}" for _ in strides))
for function in functions:
    cells = [per_function[(function, label)] for label in strides]
    print(f"{function:<21} {cells[0][0]:>13} | " + " | ".join(f"{passes:>12} {f'{worst}-way':>14}" for _, passes, worst in cells))
print(f"{'all':<21} {sum(per_function[(f, 'unpadded')][0] for f in functions):>13} | " + " | ".join(
    f"{sum(per_function[(f, label)][1] for f in functions):>12} {'':>14}" for label in strides))

# %% [markdown]
# Unpadded, every access takes at least two passes: the two matrices of a warp collide on
# every bank. Padded, every access but one is conflict-free. The one left is `update`'s
# `w[j, i] = 0`: thread $j$ writes row $j$ of column $i$, so the threads of a matrix walk a
# column, $n$ words apart, and padding between matrices cannot help within one (question 2).
#
# ### 3.3 Is it right?
#
# Random symmetric batches, both precisions: $Q$ orthogonal, $Q^T A Q = T$, and $T$ with the
# eigenvalues of $A$ (`numpy.linalg.eigvalsh`, in float64), each to within a small multiple of
# $n \varepsilon$ (times $\|A\|$ where it applies). The sizes come from the device
# (`ps.size_for_device`): batches of 12 matrices of a small, a medium and a large $n$ (5, 16
# and 33) on the simulator, of 1000 matrices (16, 64 and 200) on a GPU:

# %%
batch = ps.size_for_device(12, 1000)
# a generator of its own: device-sized draws from a shared one would change what later cells draw on a GPU
rng_batches = np.random.default_rng(28)
for dtype in (np.float32, np.float64):
    for which, n in zip(("small", "medium", "large"), ps.size_for_device((5, 16, 33), (16, 64, 200))):
        M = rng_batches.normal(size=(batch, n, n))
        A = ((M + M.transpose(0, 2, 1)) / 2).astype(dtype)
        d, e, Q = ps.tridiag.householder(A)
        A64, Q64, eps = A.astype(np.float64), Q.astype(np.float64), np.finfo(dtype).eps
        T = np.zeros_like(A64)
        k = np.arange(n)
        T[:, k, k], T[:, k[1:], k[:-1]], T[:, k[:-1], k[1:]] = d, e, e
        size = np.linalg.norm(A64, 2, axis=(1, 2))
        orthogonal = np.abs(Q64.transpose(0, 2, 1) @ Q64 - np.eye(n)).max() <= 8 * n * eps
        similar = (np.abs(Q64.transpose(0, 2, 1) @ A64 @ Q64 - T).max(axis=(1, 2)) <= 8 * n * eps * size).all()
        spectrum = (np.abs(np.linalg.eigvalsh(T) - np.linalg.eigvalsh(A64)).max(axis=1) <= 8 * n * eps * size).all()
        print(f"{np.dtype(dtype).name}, {which:<6} n: |Q^T Q - I| <= 8 n eps: {orthogonal}; "
              f"|Q^T A Q - T| <= 8 n eps |A|: {similar}; eigenvalues of T = eigvalsh(A) within 8 n eps |A|: {spectrum}")

# %% [markdown]
# ### 3.4 Large matrices: the global-memory path
#
# A float64 matrix of $n = 78$ no longer fits into 48 KiB of shared memory ($n(n+2)$ values);
# the largest are 77 (float64) and 109 (float32). Beyond, `tridiagonalize_global` runs the
# same device functions on the output $Q$ itself, in global memory: one block per matrix, and
# each thread loops over the columns `first, first + step, ...` when $n$ exceeds the block.
#
# `householder` switches to it by itself for large $n$. To watch it at a size the simulator
# runs quickly, we launch it directly with fewer threads than columns, 4 threads for 12
# columns (3 columns per thread) on the simulator and 128 for 300 on a GPU, and compare it with
# `householder`. The trace takes 4 threads for 12 columns on either, as it always runs on the
# simulator:

# %%
print(f"max_shared_n: float64 {hh.max_shared_n(np.float64)}, float32 {hh.max_shared_n(np.float32)}")
print(inspect.getsource(hh.tridiagonalize_global))


def reduce_in_global_memory(A, threads):
    """Launch tridiagonalize_global on a (batch, n, n) host array; return d, e, Q on the host."""
    count, n, _ = A.shape
    q, scratch = cuda.device_array((count, n, n), A.dtype), cuda.device_array((count, 2, n), A.dtype)
    d, sub = cuda.device_array((count, n), A.dtype), cuda.device_array((count, n), A.dtype)
    # the block-wide sums need blockDim.x elements of dynamic shared memory, as householder gives them
    hh.tridiagonalize_global[count, threads, 0, threads * A.dtype.itemsize](cuda.to_device(A), q, d, sub, scratch)
    return d.copy_to_host(), sub.copy_to_host()[:, 1:], q.copy_to_host()


n_global, threads_global = ps.size_for_device(12, 300), ps.size_for_device(4, 128)
M = np.random.default_rng(32).normal(size=(3, n_global, n_global))
A_global = (M + M.transpose(0, 2, 1)) / 2
by_global = reduce_in_global_memory(A_global, threads_global)
by_householder = ps.tridiag.householder(A_global)
# the block sums add their terms in an order set by the thread count: equal up to rounding
print("fewer threads than columns: d, e, Q agree with householder's to rounding:",
      all(np.allclose(a, b, rtol=0, atol=1e-12 * n_global * np.abs(A_global).max())
          for a, b in zip(by_global, by_householder)))
M = np.random.default_rng(33).normal(size=(3, 12, 12))
run = ps.trace.record(reduce_in_global_memory, (M + M.transpose(0, 2, 1)) / 2, 4)
# more barriers than the shared path's 5 (n - 1): each block-wide sum takes log2(threads) + 2 of them
print(f"traced, n = 12 on 4 threads: {len(run.races())} races, {run.counts()['barriers']} barriers")

# %% [markdown]
# The same up to rounding: every column sees the same operations, whichever thread owns it and
# wherever the matrix lives; only the block-wide sums add their terms in an order that the number
# of threads sets. Only the speed differs (section 6).
#
# ## 4. Solving $A x = b$
#
# With $A = Q T Q^T$ (the notes: *"$Q \, tA \, Q' x = b$ ⇒ $tA \, Q' x = Q' b$ ⇒ $Q' x = y$ ⇒
# $x = Q y$"*):
#
# $$y = Q^T b, \qquad T z = y \ \text{(tridiagonal: PCR, chapter 07)}, \qquad x = Q z .$$
#
# $T$ has the eigenvalues of $A$, so for a symmetric positive definite $A$ it is positive
# definite too, and PCR, which does not pivot, is safe. The cell below first solves by hand,
# with numpy for the two products and the package's PCR for $T z = y$ ($T$'s bands are
# $a = (0, e)$, $b = d$, $c = (e, 0)$).
#
# `solve_symmetric` does the same with everything on the device: the reduction, then
# $Q^T b$ and $Q z$ by the kernel `multiply` (one thread per entry of the result), and in
# between, for a positive definite $T$, the hybrid of chapter 08 (section 2), which does
# not pivot either (section 4.1 shows what it does when $T$ is not). The cell checks it against
# `numpy.linalg.solve` on batches of the size of section 3.3, a small and a large $n$ (5 and 16
# on the simulator, 32 and 64 on a GPU), with the error bound of a backward-stable solve
# ($16 n \varepsilon \, \kappa(A) \, |x|$):

# %%
rng_spd = np.random.default_rng(34)
N = rng_spd.normal(size=(8, 8))
A_spd = N @ N.T / 8 + np.eye(8)
b = rng_spd.normal(size=8)
d, e, Q = ps.tridiag.householder(A_spd)
y = Q.T @ b
z = ps.tridiag.solve(np.concatenate([[0.0], e]), d, np.concatenate([e, [0.0]]), y, method="pcr")
x_steps = Q @ z
print("Q (T (Q^T x)) = b by hand, vs numpy.linalg.solve, within 1e-12:",
      np.allclose(x_steps, np.linalg.solve(A_spd, b), rtol=0, atol=1e-12))
print(inspect.getsource(hh.multiply))
rng_solve = np.random.default_rng(36)
for dtype in (np.float32, np.float64):
    for which, n in zip(("small", "large"), ps.size_for_device((5, 16), (32, 64))):
        N = rng_solve.normal(size=(batch, n, n))
        A = (N @ N.transpose(0, 2, 1) / n + np.eye(n)).astype(dtype)
        rhs = rng_solve.normal(size=(batch, n)).astype(dtype)
        x_gpu = ps.tridiag.solve_symmetric(A, rhs)
        A64 = A.astype(np.float64)
        expected = np.linalg.solve(A64, rhs.astype(np.float64)[..., None])[..., 0]
        bound = 16 * n * np.finfo(dtype).eps * np.linalg.cond(A64) * np.abs(expected).max(axis=1)
        print(f"{np.dtype(dtype).name}, {which:<5} n: solve_symmetric = numpy.linalg.solve "
              f"within 16 n eps cond(A) |x|: {bool((np.abs(x_gpu - expected).max(axis=1) <= bound).all())}")

# %% [markdown]
# ### 4.1 When $A$ is not positive definite
#
# The notes promise the decomposition of *any* symmetric matrix, and $A = Q T Q^T$ exists for
# every one. But if $A$ has eigenvalues of both signs, so has $T$, and an elimination without
# pivoting may divide by a pivot that is tiny or zero although $T$ is perfectly well
# conditioned. Two such matrices of $n = 16$, both with condition number about 11:
# $\mathrm{tridiag}(1, 10^{-10}, 1)$ and $\mathrm{tridiag}(1, 0, 1)$. First the route of
# section 4 by hand, with the non-pivoting hybrid for $T z = y$, against LAPACK
# (`numpy.linalg.solve`) with the bound of a backward-stable solve,
# $\|x - x^*\| / \|x^*\| \le 100\, n \varepsilon \kappa(A)$:

# %%
n_bad = 16
off = np.ones(n_bad - 1)
INDEFINITE = {"tridiag(1, 1e-10, 1)": np.diag(np.full(n_bad, 1e-10)) + np.diag(off, 1) + np.diag(off, -1),
              "tridiag(1, 0, 1)": np.diag(off, 1) + np.diag(off, -1)}
b_bad = np.random.default_rng(37).normal(size=n_bad)


def relative_error(x, A):
    """||x - x*|| / ||x*|| with x* = numpy.linalg.solve(A, b_bad), and whether it is within 100 n eps kappa(A)."""
    expected = np.linalg.solve(A, b_bad)
    error = np.linalg.norm(x - expected) / np.linalg.norm(expected)
    return error, error <= 100 * n_bad * np.finfo(np.float64).eps * np.linalg.cond(A)


for name, A_bad in INDEFINITE.items():
    d, e, Q = ps.tridiag.householder(A_bad)
    T_bands = (np.concatenate([[0.0], e]), d, np.concatenate([e, [0.0]]))
    eigenvalues = np.linalg.eigvalsh(A_bad)
    print(f"{name}: kappa = {np.linalg.cond(A_bad):.1f}, eigenvalues from {eigenvalues[0]:.2f} to {eigenvalues[-1]:.2f}")
    try:
        z = ps.tridiag.solve(*T_bands, Q.T @ b_bad, method="hybrid")
        error, within = relative_error(Q @ z, A_bad)
        bound = 100 * n_bad * np.finfo(np.float64).eps * np.linalg.cond(A_bad)
        print(f"    hybrid (no pivoting): within the bound: {within}; over 1000 times the bound: {error > 1000 * bound}")
    except np.linalg.LinAlgError as error:
        print(f"    hybrid (no pivoting): LinAlgError: {str(error).split('. ')[0]}")

# %% [markdown]
# The first answer is wrong without a word (its error is more than a thousand times the bound); the second stops at a zero pivot although the matrix is far from singular. The fix has
# two parts:
#
# - **Tell.** $T$ is positive definite exactly when every pivot of $T = L D L^T$ is positive:
#   $p_0 = d_0$, $p_i = d_i - e_i^2 / p_{i-1}$ (Cholesky's pivots, squared). One thread per
#   matrix runs this recurrence (`pivoting.positive_definite`) before the solve.
# - **Pivot where needed.** If some $T$ of the batch is not positive definite, `solve_symmetric`
#   solves with `method="pivoting"`: Gaussian elimination with partial pivoting, as LAPACK's
#   `?gtsv`. At each step it takes the larger of the current pivot and the entry below it,
#   swapping the two rows if needed; a swap puts one extra entry two places right of the
#   diagonal (fill), so $U$ has two super-diagonals. On a tridiagonal matrix the entries of $U$
#   never grow beyond twice the largest of the matrix, so the elimination is backward stable for
#   every nonsingular system. The step below is all of it; short systems get one thread each.
#   A long system is cut into chunks, each thread eliminating its chunk with this step, and a
#   small system of the chunks' boundary rows couples them, as in SPIKE (Chang, Stratton, Kim and
#   Hwu's GPU solver, which cuSPARSE's `gtsv2` follows, uses diagonal pivoting instead). No pivot
#   crosses a chunk's edge, so a chunk whose own block is nearly singular is caught and its system
#   solved again by one thread. The module docstring says more, with the measurements against
#   cuSPARSE (`benchmarks/tridiag.csv`).

# %%
lu = importlib.import_module("prefixsum.tridiag.lu")
print(inspect.getsource(lu.pivot))
for name, A_bad in INDEFINITE.items():
    d, e, Q = ps.tridiag.householder(A_bad)
    T_bands = (np.concatenate([[0.0], e]), d, np.concatenate([e, [0.0]]))
    z = ps.tridiag.solve(*T_bands, Q.T @ b_bad, method="pivoting")
    x_fixed = ps.tridiag.solve_symmetric(A_bad, b_bad)
    print(f"{name}: pivoting by hand within the bound: {relative_error(Q @ z, A_bad)[1]}; "
          f"solve_symmetric within the bound: {relative_error(x_fixed, A_bad)[1]}")
try:
    ps.tridiag.solve_symmetric(np.diag([1.0, 0.0, -2.0, 3.0]), np.ones(4))
except np.linalg.LinAlgError as error:
    print("a singular A:", error)

# %% [markdown]
# ### 4.2 The fair baselines: Cholesky, and for an indefinite $A$ Bunch–Kaufman or Aasen
#
# For a symmetric positive definite $A$ the textbook solve is neither LU nor this route but
# Cholesky, $A = L L^T$: no pivoting (its pivots are positive, as above), backward stable, and
# half of LU's arithmetic. Its triangular solves cost $2n^2$. Against it, in flops for one
# $n \times n$ matrix (section 7 counts this chapter's):
#
# | | flops | × Cholesky's |
# | --- | --- | --- |
# | Cholesky | $\frac13 n^3$ | 1 |
# | Bunch–Kaufman $L D L^T$ or Aasen $L T L^T$ (indefinite $A$) | $\frac13 n^3$ | 1 |
# | LU with partial pivoting (`torch.linalg.solve`) | $\frac23 n^3$ | 2 |
# | this chapter's route | $\frac{10}{3} n^3$ | 10 |
#
# Ten times Cholesky's arithmetic: for one solve with one $A$ the Householder route is never the
# fast way, on a GPU or anywhere. It pays where $T$ itself is worth having: the eigenvalues of
# $A$, or many shifted systems $(A - \sigma I) x = b$, each a tridiagonal solve of $O(n)$ once
# $T$ and $Q$ are known (question 4). Section 6 measures the route against PyTorch's batched
# LU and Cholesky (`torch.linalg.cholesky_ex` and `cholesky_solve`). Cholesky is the fair
# baseline for a positive definite $A$ only. For a symmetric **indefinite** $A$ (section 4.1) it
# is a symmetric factorization with pivoting, also $\frac13 n^3$ flops: Bunch–Kaufman's
# $A = L D L^T$ with $1 \times 1$ and $2 \times 2$ pivots ([Bunch and Kaufman 1977](../docs/references.md#bunch-and-kaufman-1977);
# LAPACK's `?sytrf`, `scipy.linalg.ldl`) or Aasen's $A = L T L^T$ with a tridiagonal $T$
# ([Aasen 1971](../docs/references.md#aasen-1971)). Section 6 times positive definite matrices only;
# against an indefinite one, these, not Cholesky, are what this route would have to beat.

# %% [markdown]
# ## 5. Exercises
#
# Three exercises: the reflector of one step on the host, safe from overflow (warm-up), the
# rank-two update that every thread applies to its column (core), and the block-wide sum that
# takes the serial phases off one thread (stretch). `ps.hint("09.householder-reflector")` opens the hints one at
# a time.
#
# ### Exercise 09.householder-reflector (warm-up, 1 point)
#
# Section 2's `householder_step` computes the reflector of one step from $h = |x|^2$, and so
# does the notes' kernel, but not before dividing $x$ by a scale: for entries of about
# $10^{200}$, $|x|$ is a float64 and $|x|^2$ is not (it overflows to infinity), and for entries
# of about $10^{-200}$, $|x|^2$ underflows to 0. Write the reflector as a host function that
# works for both: given $x$ (a numpy vector of length $n \ge 2$, any entries a float64 holds),
# return `(u, H)` such that $P = I - u u^T / H$ is orthogonal and sends $x$ to $g e$, $e$ the
# **last** unit vector (so $|g| = |x|$), with $g$ of the sign opposite to $x_{n-1}$ ($g = -|x|$
# when $x_{n-1} = 0$), as section 1 chose it. Every number you return must be finite. Loops or
# numpy, as you like.
#
# `ps.check.reflector` runs your function on random vectors of 2, 3, 5 and 8 entries (either
# sign of $f$, $f = 0$, and vectors nearly parallel to $e$, where the wrong sign cancels) and
# checks, in float64, that $P$ is orthogonal and that $P x = -\operatorname{sign}(f)|x| \, e$;
# the second line repeats it with float32 inputs (and a float32 tolerance), the last two with
# the vectors multiplied by $10^{200}$ and by $10^{-200}$.

# %% tags=["exercise"] points=1 todo="return (u, H) such that P = I - u u^T / H is orthogonal and sends x to -sign(x[-1]) |x| times the last unit vector, u and H finite even where |x|^2 overflows or underflows a float64" exercise_id="09.householder-reflector"
def my_reflector(x):
    ### BEGIN SOLUTION
    y = np.asarray(x, dtype=np.float64)
    y = y / np.abs(y).sum()  # u and H of y / s give the P of y, and |y / s|^2 is near 1
    h = float(np.dot(y, y))
    f = float(y[-1])
    g = -math.sqrt(h) if f >= 0 else math.sqrt(h)
    u = y.copy()
    u[-1] = f - g
    H = h - f * g
    ### END SOLUTION
    return u, H


# %% tags=["check"] exercise_id="09.householder-reflector"
print(ps.check.reflector(my_reflector))
print(ps.check.reflector(my_reflector, dtype=np.float32))
print(ps.check.reflector(my_reflector, magnitude=1e200, name="my_reflector at 1e200"))
print(ps.check.reflector(my_reflector, magnitude=1e-200, name="my_reflector at 1e-200"))

# %% [markdown]
# ### Exercise 09.rank-two-update (core, 2 points)
#
# Phase 4 of a step replaces $A$ by $A - q u^T - u q^T$ (section 2): every entry changes, and
# the result is symmetric again. Write the kernel `my_update(A, u, q)` for a batch of matrices
# `A` of shape `(batch, n, n)` with vectors `u` and `q` of shape `(batch, n)`, float64: block
# `m` updates matrix `m` in place, and **thread `j` owns column `j`** (section 3.1), so that the
# threads of a warp touch consecutive addresses and no two threads write one entry. The launch
# is given: one block of 64 threads per matrix, $n \le 64$.
#
# **Worked example.** One matrix, $n = 2$, $A = I$, $u = (1, 2)$, $q = (3, 1)$: entry $(k, j)$
# loses $q_k u_j + u_k q_j$, and $A$ becomes $\begin{pmatrix} -5 & -7 \\ -7 & -3 \end{pmatrix}$,
# symmetric again. Who touches what, in block $m$:
#
# | thread | reads | writes |
# |---|---|---|
# | $j < n$ | column $j$ of `A[m]`, all of `u[m]` and `q[m]` | column $j$ of `A[m]`, every row $k$ |
# | $j \ge n$ | nothing | nothing |
#
# At row $k$, the threads of a warp write `A[m, k, 0..31]`, 32 neighbouring words.
#
# The check launches it itself, on its own arrays with 64 threads a block, on batches of matrices
# of 1 to 64 rows, traced, and allows a thread at most $8 \cdot 64$ memory accesses: a column
# each (even one that reads `u[m, j]` and `q[m, j]` again at every row), not the whole matrix
# for one thread.

# %% tags=["exercise"] exercise_id="09.rank-two-update" points=2 todo="my_update: thread j of block m replaces column j of A[m] by the same column of A[m] - q u^T - u q^T (u, q of matrix m), for every row; threads j >= n do nothing"
THREADS = 64


@cuda.jit
def my_update(A, u, q):
    m = cuda.blockIdx.x
    j = cuda.threadIdx.x
    n = A.shape[1]
    ### BEGIN SOLUTION
    if j < n:
        uj, qj = u[m, j], q[m, j]
        for k in range(n):
            A[m, k, j] -= q[m, k] * uj + u[m, k] * qj
    ### END SOLUTION


def my_rank_two(A, u, q):
    A = cuda.to_device(A)
    my_update[A.shape[0], THREADS](A, cuda.to_device(u), cuda.to_device(q))
    return A


# %% tags=["check"] exercise_id="09.rank-two-update"
def rank_two_cases():
    for batch, n in ((1, 1), (2, 2), (3, 5), (2, 16), (2, 33), (1, 64)):
        rng_case = np.random.default_rng(100 * n + batch)
        M = rng_case.normal(size=(batch, n, n))
        yield (M + M.transpose(0, 2, 1)) / 2, rng_case.normal(size=(batch, n)), rng_case.normal(size=(batch, n))


def rank_two_by_the_check(A, u, q):  # the check launches the kernel itself: its arrays, a block of 64 threads a matrix
    A = cuda.to_device(A)
    my_update[A.shape[0], 64](A, cuda.to_device(u), cuda.to_device(q))
    return A


print(ps.check.function(rank_two_by_the_check, lambda A, u, q: A - (q[:, :, None] * u[:, None, :] + u[:, :, None] * q[:, None, :]),
                        list(rank_two_cases()), name="my_update",
                        budget=ps.check.Budget(accesses_per_step=8 * 64, device_work=True)))

# %% [markdown]
# ### Exercise 09.parallel-norm (stretch, 2 points)
#
# Phases 1 and 3 of a step sum over up to $n$ entries, and in the shared-memory kernel one
# thread does it while the others wait at the next barrier. The global-memory path (one matrix
# per block, section 6) shares such a sum among all the threads of the block: a **tree
# reduction** in shared memory, $\log_2(\text{threads})$ halvings, each behind a barrier (the
# classic reduction of Harris's "Optimizing parallel reduction in CUDA"; the up-sweep of chapter
# 03's Blelloch scan is the same tree). Write the kernel `my_squared_norms(X, h)`: block `b`
# computes `h[b] = (X[b] ** 2).sum()` for a batch `X` of shape `(batch, n)`, float64, with 64
# threads per block. Each thread's partial sum over entries `t, t + 64, ...` is given; combine
# the 64 partials with the tree and let one thread write the total.
#
# **Invariant.** After each step the partials still in play add up to the block's total, and
# there are half as many of them; after $\log_2 64 = 6$ steps one is left. With 8 partials
# $3, 1, 4, 1, 5, 9, 2, 6$ (one of the trees that works, $t \leftarrow r$: partial $t$ adds
# partial $r$):
#
# | step | reads ($t \leftarrow r$) | partials in play after it |
# |---|---|---|
# | 1 | 0←4, 1←5, 2←6, 3←7 | 8 10 6 7 |
# | 2 | 0←2, 1←3 | 14 17 |
# | 3 | 0←1 | 31 |
#
# A step reads only what the step before wrote, never a cell written in the same step, so
# a barrier separates each step from the one before it (and the first from the stores of the
# partials).
#
# The check runs it on 1 to 300 entries and allows at most 8 barriers per thread and 16 memory
# accesses between two barriers: one thread adding up the 64 partials fails.

# %% tags=["exercise"] exercise_id="09.parallel-norm" points=2 todo="my_squared_norms: combine the 64 partial sums of the block into their total in log2(64) steps, every step shared by the threads and behind a barrier, and write the total to h[b]"
NORM_THREADS = 64


@cuda.jit
def my_squared_norms(X, h):
    partials = cuda.shared.array(NORM_THREADS, np.float64)
    b, t = cuda.blockIdx.x, cuda.threadIdx.x
    part = 0.0
    for k in range(t, X.shape[1], NORM_THREADS):
        part += X[b, k] * X[b, k]
    partials[t] = part
    ### BEGIN SOLUTION
    half = NORM_THREADS // 2
    while half > 0:
        cuda.syncthreads()
        if t < half:
            partials[t] += partials[t + half]
        half //= 2
    if t == 0:
        h[b] = partials[0]
    ### END SOLUTION


def my_norms(X):
    h = cuda.device_array(X.shape[0], X.dtype)
    my_squared_norms[X.shape[0], NORM_THREADS](cuda.to_device(X), h)
    return h


# %% tags=["check"] exercise_id="09.parallel-norm"
norm_cases = [(np.random.default_rng(n).normal(size=(batch, n)),) for batch, n in ((1, 1), (2, 2), (3, 63), (2, 64), (2, 65), (1, 300))]
def norms_by_the_check(X):  # the check launches the kernel itself: its arrays, a block of 64 threads a row
    h = cuda.device_array(X.shape[0], X.dtype)
    my_squared_norms[X.shape[0], 64](cuda.to_device(X), h)
    return h


print(ps.check.function(norms_by_the_check, lambda X: (X ** 2).sum(axis=1), norm_cases, name="my_squared_norms",
                        budget=ps.check.Budget(barriers=8, accesses_per_step=16, device_work=True)))

# %% [markdown]
# ## 6. On the GPU
#
# `benchmarks/householder.py` measured on one GPU, on batches of random symmetric positive
# definite matrices in float32 and float64, every result checked before it was timed
# (`benchmarks/README.md` describes the method; medians of 5, as these calls take up to
# seconds). The package's rows come from `householder_calls.csv` (the `householder_calls`
# stage): the reduction kernel alone, queued between two CUDA events (the GPU's work without
# the host's), and `solve_symmetric` as a user calls it, from device arrays and from numpy
# arrays, on the host clock. PyTorch's rows come from `householder.csv` at the same shapes:
# `torch.linalg.solve` (LU with partial pivoting), `torch.linalg.cholesky_ex` followed by
# `cholesky_solve` (Cholesky, the fair baseline of section 4.2) and `torch.linalg.eigh`, between
# events but not queued, since these calls wait for the GPU themselves. One table, with the
# ratios the text below uses:

# %%
calls_rows, torch_rows = results.read("householder_calls.csv"), results.read("householder.csv")
print(f"{calls_rows[0]['device']}, {calls_rows[0]['date']} (package) and {torch_rows[0]['device']}, {torch_rows[0]['date']} "
      f"(torch {torch_rows[0]['torch']}); every result correct: {all(row['correct'] for row in calls_rows + torch_rows)}")
DTYPES = ("float32", "float64")
CASES = sorted({(row["batch"], row["n"]) for row in calls_rows}, key=lambda case: case[1])
COLUMNS = {"reduction kernel": ("householder_calls.csv", "householder (reduction, events)"),
           "solve_symmetric, device": ("householder_calls.csv", "solve_symmetric (whole call, device arrays)"),
           "solve_symmetric, numpy": ("householder_calls.csv", "solve_symmetric (whole call, numpy)"),
           "torch solve": ("householder.csv", "torch.linalg.solve"),
           "torch Cholesky": ("householder.csv", "torch cholesky_ex + cholesky_solve"),
           "torch eigh": ("householder.csv", "torch.linalg.eigh")}
ms = {(column, t, case): results.value(name, "median_us", what=what, dtype=t, batch=case[0], n=case[1]) / 1000
      for column, (name, what) in COLUMNS.items() for t in DTYPES for case in CASES}
RATIOS = {"ours / torch solve": lambda t, c: ms["solve_symmetric, device", t, c] / ms["torch solve", t, c],
          "ours / torch Cholesky": lambda t, c: ms["solve_symmetric, device", t, c] / ms["torch Cholesky", t, c],
          "numpy / device": lambda t, c: ms["solve_symmetric, numpy", t, c] / ms["solve_symmetric, device", t, c],
          "eigh / kernel": lambda t, c: ms["torch eigh", t, c] / ms["reduction kernel", t, c]}
SHAPES = [(t, c) for t in DTYPES for c in CASES]
print(f"\n{'median (ms)':<24}" + "".join(f"{f'{t} {c[0]} x {c[1]}':>20}" for t, c in SHAPES))
for column in COLUMNS:
    print(f"{column:<24}" + "".join(f"{ms[column, t, c]:>20.2f}" for t, c in SHAPES))
for label, ratio in RATIOS.items():
    print(f"{label:<24}" + "".join(f"{ratio(t, c):>20.1f}" for t, c in SHAPES))
print(f"\nflops of this route / LU's: {(10 / 3) / (2 / 3):.0f}, / Cholesky's: {(10 / 3) / (1 / 3):.0f} (section 7)")
print("torch's Cholesky faster than its LU at every shape:",
      all(ms["torch Cholesky", t, c] < ms["torch solve", t, c] for t, c in SHAPES))

# %%
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(9, 3.5))
width = 1 / (len(COLUMNS) + 1)
for k, column in enumerate(COLUMNS):
    ax.bar([i + k * width for i in range(len(CASES))], [ms[column, "float64", c] for c in CASES], width, label=column)
ax.set_xticks([i + width * (len(COLUMNS) - 1) / 2 for i in range(len(CASES))], [f"{b} x {n}" for b, n in CASES])
ax.set_yscale("log")
ax.set_ylabel("median time (ms), log scale")
ax.set_title(f"float64, {calls_rows[0]['device']}: each bar one call or kernel")
ax.set_xlabel("batch x n")
_ = ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))

# %% [markdown]
# What the table says (every figure is in the table or its ratio rows):
#
# - **Against PyTorch's LU and Cholesky, our route loses** at every shape ("ours / torch
#   solve", "ours / torch Cholesky"), by far at $n = 512$. That is no surprise: LU needs
#   $\frac23 n^3$ flops, Cholesky $\frac13 n^3$, this route five and ten times as many
#   (section 4.2), and Cholesky, the fair baseline for a symmetric positive definite $A$, is
#   the fastest of the three here. The Householder route pays where $T$ itself is wanted.
# - **Against `torch.linalg.eigh`, our reduction kernel is faster** ("eigh / kernel" above 1),
#   but the comparison is not like for like: `eigh` computes every eigenvalue and eigenvector,
#   our kernel only $T$ and $Q$, the first part of that work. At $n = 64$ the gap is widest; in
#   PyTorch's source as we read it (`linalg_eigh_cusolver` in
#   `aten/src/ATen/native/cuda/linalg/BatchLinearAlgebraLib.cpp`; a reading, not a measurement)
#   batches of matrices up to $n = 32$ go to cuSOLVER's batched Jacobi solver and larger ones
#   are solved one matrix after another.
# - **From numpy arrays the transfers dominate** the small matrices ("numpy / device"). What a
#   call costs beyond its kernels is measured once for the workbook, in
#   chapter 08 (`08_tridiagonal_hybrid`), section 3.
# - **$n = 512$ takes the global-memory path**: one block per matrix, and 100 blocks are fewer
#   than the GPU's multiprocessors (an H100 SXM has 132), so the kernel time is the time of one
#   matrix, all of its $O(n^3)$ work in global memory. There the whole block shares the sums of
#   `reflector` and `correct` (`block_sum`, exercise 09.parallel-norm; the instructor's version
#   prints the package's code here):

# %% tags=["instructor"]
print(inspect.getsource(hh.block_sum))

# %%
print(inspect.getsource(hh.correct_parallel))

# %% [markdown]
# ## 7. Summary
#
# Per matrix of size $n$, one thread per column (the shared-memory path):
#
# | | reduction (`tred2`'s first loop) | accumulating $Q$ | solve $Q T Q^T x = b$ |
# | --- | --- | --- | --- |
# | work (multiply-adds) | $n^3$: $p$ ($i^2$) and the rank-2 update of the whole $i \times i$ block ($2i^2$) per step; LAPACK updates one triangle, $\frac23 n^3$ | $\frac23 n^3$ | reduction and $Q$, then $2n^2$ for $Q^T b$ and $Q z$, and the tridiagonal solve's $O(n)$ (chapter 08's hybrid) |
# | depth | $n-1$ steps of 4 phases (the last one trivial), each $O(i)$ serial: $O(n^2)$ | $n-1$ phases of $O(i)$: $O(n^2)$ | $O(n)$ per product; the tridiagonal solve's chunk sweeps of $R$ rows and $\log_2 (n / R)$ shuffle steps (chapter 08, section 2.1) |
# | barriers | $4(n-1)$ | $n-1$ | (separate launches) |
# | memory | $A$ read once ($n^2$), $Q$ written once ($n^2$), $d$ and $e$; everything else in $n(n+2)$ values of shared memory | in place | $Q$ read twice |
#
# In flops (two per multiply-add) the textbook counts are $\frac43 n^3$ for $T$ and
# $\frac43 n^3$ more for $Q$; this package spends $2n^3 + \frac43 n^3 = \frac{10}{3} n^3$,
# against $\frac23 n^3$ for LU. Above 77 (float64) or 109 (float32) every access of the
# $O(n^3)$ work goes to global memory, one block per matrix.
#
# **Questions.**
# 1. For $x = (10^{-4}, 1)$ in float32, section 1 found $H = 0$ with the wrong sign of $g$.
#    Take $x = (10^{-6}, 1)$ in float64: compute $u$ and $H$ with both signs, then
#    $|P^T P - I|$. How many correct digits does the wrong sign leave, and why?
# 2. The kernel updates the whole $i \times i$ block although it is symmetric. How much work
#    would updating one triangle save, and what would it cost in memory access (which
#    addresses would the threads of a warp touch)? `update` also zeroes `w[j, i]`, a walk down
#    a column (the one bank conflict left in section 3.2): how many passes does one such write
#    take at $n = 16$, and how could the kernel avoid it?
# 3. In the shared-memory path one thread sums $h$ and $u \cdot p$ while the others wait; the
#    global path uses a block-wide tree (`block_sum`, section 6). How many barrier phases
#    does the tree add per step, and how much shorter is the longest path at $n = 512$ with 256
#    threads? Why does the shared path, with several matrices in a block, not use it as it is?
# 4. Once $A = Q T Q^T$ is known, how much does solving $(A - \sigma I) x = b$ cost for a new
#    shift $\sigma$? Compare with a new LU factorisation of $A - \sigma I$.
# 5. Why are the last row and column of $Q$ those of the identity? Which would it be if the
#    reduction went from the first row down?
# 6. Section 6's table finds `solve_symmetric`'s call from numpy arrays several times slower
#    than its call from device arrays on the batches of 10,000 matrices. List what the call
#    from numpy arrays does besides the kernels (read `solve_symmetric` and `_check_matrices` in
#    `prefixsum/tridiag/householder.py`) and estimate each step's time from the bytes it moves.
#    What would pinned host memory change?
