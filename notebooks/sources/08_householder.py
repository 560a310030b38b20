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
# # 08 · Householder tridiagonalization and the symmetric solve
#
# Seed 003, handwritten notes on tridiagonal solvers, has two parts: ① parallel cyclic reduction
# (PCR, chapter 07) and ② *"Householder reduction → tridiagonal decomposition of any symmetric
# matrix"*. Part ② turns a symmetric matrix $A$ into $A = Q T Q^T$ with $Q$ orthogonal and $T$
# symmetric tridiagonal, by a sequence of reflections, in the order of the classic `tred2`
# routine: from the last row upward. Then $A x = b$ becomes a tridiagonal system, which part ①
# solves. This chapter follows the notes: a reflection as a mirror, one reduction step on a
# $5 \times 5$ matrix, the kernel with several matrices per block (the notes'
# `tidx = threadIdx.x % n`), the solve $Q T Q^T x = b$, and measurements on a GPU against
# PyTorch (section 6).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import importlib
import inspect
import math

import numpy as np
from numba import cuda

from prefixsum.cli import results

hh = importlib.import_module("prefixsum.tridiag.householder")  # the module (ps.tridiag.householder is the function)

print(ps.device_info())

# %% [markdown]
# ## 1. A reflection is a mirror
#
# Seed 003 starts from the Householder matrix $P = I - 2 w w^T$ with $|w| = 1$, or with any
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
# In two dimensions, with $e = (0, 1)$:

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

# %% [markdown]
# The picture: $x$, the mirror (orthogonal to $u$), and the image on the circle of radius
# $|x|$. $u = x - P x$ joins the two tips, and the mirror cuts it in half. In the middle and on
# the right, an $x$ close to $e$: with `tred2`'s sign the mirror is well away from $x$; with the
# other sign the image lands next to $x$, and $u$ is a short difference of long vectors.

# %%
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
# In numpy, one step and the whole loop, on a small matrix with integer entries:

# %%
def householder_step(A, i):
    """Seed 003's step i on a numpy matrix: returns P A P and the reflector P."""
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

# %% [markdown]
# Each step zeroes row $i$ and column $i$ left of (and above) the sub-diagonal: the framed
# cells are the ones the step just zeroed. Blank cells are zero (up to rounding); colours are
# $\log_{10}|a|$.

# %%
_ = ps.viz.sparsity(steps, ["A", "after step i = 4", "after step i = 3", "after step i = 2: T"], highlight=zeroed)

# %% [markdown]
# After the three steps $T = P_2 P_3 P_4 \, A \, P_4 P_3 P_2$, so $Q = P_4 P_3 P_2$ (the
# notes, numbering the reflectors in the order they are applied: *"$A'' = P_2 A' P_2 = P_2 P_1
# A P_1 P_2$"*, *"tridiag $A = Q' A Q$"*). Step $i = 1$ would reflect a single entry onto
# itself: nothing to do.

# %%
T5 = steps[-1]
print("T =\n", np.where(np.abs(T5) < 1e-12, 0.0, T5).round(3) + 0.0)
Q5 = reflectors[0] @ reflectors[1] @ reflectors[2]
print("numpy steps: Q^T A Q = T:", np.allclose(Q5.T @ A5 @ Q5, T5, rtol=0, atol=1e-12),
      "| T tridiagonal:", np.allclose(np.tril(T5, -2), 0, rtol=0, atol=1e-12))

# %% [markdown]
# The package's `householder` does the same on the GPU (the simulator here) and returns $T$ as
# its diagonal $d$ and sub-diagonal $e$, with $Q$:

# %%
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
# (`w[k, tidx]`): no bank conflicts in shared memory, coalesced in global memory. A step has
# four phases between barriers:
#
# 1. `reflector`: the thread owning row $i$ scales $x$, computes $h, f, g$, stores $u$ in row
#    $i$ (the notes: *"`sAds[nt + i*n + l] = f - g` // store u"*), $H$ in `hs[i]`, and
#    $T[i, i-1] = \mathrm{scale} \cdot g$ (the notes' *"`s[gb_index_x*n + i] = scale*g`"*);
# 2. `project`: every thread $j < i$ computes $p_j = (A u)_j / H$;
# 3. `correct`: the owner of row $i$ computes $K$ and turns $p$ into $q$ (in the global-memory
#    path, one matrix per block, the whole block shares phases 1 and 3: section 6.1);
# 4. `update`: every thread $j < i$ updates its column of $A - q u^T - u q^T$.
#
# `reflector` and `update` are exercises 08.householder-reflector and 08.rank-two-update; the instructor's version prints the package's code here.

# %%
for device_function in (hh.project, hh.correct, hh.reduce_rows):
    print(inspect.getsource(device_function))

# %% tags=["instructor"]
for device_function in (hh.reflector, hh.update):
    print(inspect.getsource(device_function))

# %% [markdown]
# Phases 1 and 3 are serial: one thread sums over $i$ entries while the others wait at the next
# barrier. Section 6 comes back to that.
#
# Afterwards `accumulate` (`tred2`'s second loop) turns the $u$ vectors left in rows
# $1, \dots, n-1$ into $Q$, in place, applying the reflectors from the smallest block outward:
# $Q_{\text{block}} \leftarrow Q_{\text{block}} - u \, (u^T Q_{\text{block}}) / H$, one column per
# thread again. Row and column $n-1$ are never touched by a reflector: they stay those of the
# identity.

# %%
print(inspect.getsource(hh.accumulate))
print(inspect.getsource(hh.tridiagonalize))

# %% [markdown]
# ### 3.2 Several matrices per block
#
# A matrix of $n = 5$ needs only 5 threads, far too few for a block. The notes put several
# matrices in one block: *"tidx = threadIdx.x % d; Qt = (threadIdx.x - tidx)/d;
# gbx = Qt + blockIdx.x * (blockDim.x/d)"*. The shared-memory kernel does exactly that (`slot`
# is the notes' `Qt`, `matrix` their `gbx`), and cuts the block's dynamic shared memory into one
# $n \times (n+2)$ piece per matrix: the matrix, $p$ and the $H$ values.

# %%
print(inspect.getsource(hh.tridiagonalize_shared))

# %% [markdown]
# The host picks `per_block`: as many matrices as fit into 256 threads and 48 KiB of shared
# memory. The tracer records the real launches, checks every shared-memory access for races,
# and counts the barriers each thread passes: $4(n-1)$ in the reduction and $n-1$ in the
# accumulation.

# %%
launches = {}
for n_traced, batch_traced in ((5, 60), (16, 20)):
    sample = np.random.default_rng(n_traced).normal(size=(batch_traced, n_traced, n_traced))
    run = ps.trace.record(ps.tridiag.householder, (sample + sample.transpose(0, 2, 1)) / 2)
    launch = launches[n_traced] = run.launches[0]
    print(f"n = {n_traced:2d}, {batch_traced} matrices: {launch.kernel}, {launch.grid[0]} blocks of {launch.block[0]} threads "
          f"({launch.block[0] // n_traced} matrices each), {run.counts()['barriers']} barriers = 5 (n - 1), "
          f"{len(run.races())} races, {len(run.uninitialized_reads())} uninitialized reads")

# %% [markdown]
# With $n = 5$: 51 matrices in a block of 255 threads, and the last 9 of the 60 in a second
# block (its other slots have no matrix, and their threads only pass the barriers). Who is who
# in block 1:

# %%
per_block_5 = launches[5].block[0] // 5
for thread in (0, 1, 4, 5, 6, 44, 45, 254):
    tidx, slot = thread % 5, thread // 5
    matrix = 1 * per_block_5 + slot
    print(f"block 1, threadIdx.x = {thread:3d}: tidx = {tidx}, slot (Qt) = {slot:2d}, matrix (gbx) = {matrix:3d}"
          + ("" if matrix < 60 else "  (no matrix: passes the barriers only)"))

# %% [markdown]
# ### 3.3 Is it right?
#
# Random symmetric batches, both precisions: $Q$ orthogonal, $Q^T A Q = T$, and $T$ with the
# eigenvalues of $A$ (`numpy.linalg.eigvalsh`, in float64), each to within a small multiple of
# $n \varepsilon$ (times $\|A\|$ where it applies). The sizes come from the device
# (`ps.size_for_device`): batches of 24 matrices of a small, a medium and a large $n$ (5, 16
# and 33) on the simulator, of 1000 matrices (16, 64 and 200) on a GPU:

# %%
batch = ps.size_for_device(24, 1000)
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

# %%
print(f"max_shared_n: float64 {hh.max_shared_n(np.float64)}, float32 {hh.max_shared_n(np.float32)}")
print(inspect.getsource(hh.tridiagonalize_global))

# %% [markdown]
# `householder` switches to it by itself for large $n$. To watch it at a size the simulator
# runs quickly, we launch it directly with fewer threads than columns, 4 threads for 12
# columns (3 columns per thread) on the simulator and 128 for 300 on a GPU, and compare it with
# `householder`. The trace takes 4 threads for 12 columns on either, as it always runs on the
# simulator:


# %%
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
# definite too, and PCR, which does not pivot, is safe. By hand, with numpy for the two
# products and the package's PCR for $T z = y$; $T$'s bands are $a = (0, e)$, $b = d$,
# $c = (e, 0)$:

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

# %% [markdown]
# `solve_symmetric` does the same with everything on the device: the reduction, then
# $Q^T b$ and $Q z$ by the kernel `multiply` (one thread per entry of the result), and in
# between `tridiag.solve`'s default method, the hybrid of chapter 07 (section 12), which does
# not pivot either. Checked against `numpy.linalg.solve` on batches of the size of section 3.3,
# a small and a large $n$ (5 and 16 on the simulator, 32 and 64 on a GPU), with the error bound
# of a backward-stable solve ($16 n \varepsilon \, \kappa(A) \, |x|$):

# %%
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
# ## 5. Exercises
#
# Three exercises: the reflector of one step on the host, safe from overflow (warm-up), the
# rank-two update that every thread applies to its column (core), and the block-wide sum that
# takes the serial phases off one thread (stretch). `ps.hint("08.householder-reflector")` opens the hints one at
# a time.
#
# ### Exercise 08.householder-reflector (warm-up, 1 point)
#
# Section 2's `householder_step` computes the reflector of one step from $h = |x|^2$, and so
# does seed 003's kernel, but not before dividing $x$ by a scale: for entries of about
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

# %% tags=["exercise"] points=1 todo="return (u, H) such that P = I - u u^T / H is orthogonal and sends x to -sign(x[-1]) |x| times the last unit vector, u and H finite even where |x|^2 overflows or underflows a float64" exercise_id="08.householder-reflector"
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


# %% tags=["check"] exercise_id="08.householder-reflector"
print(ps.check.reflector(my_reflector))
print(ps.check.reflector(my_reflector, dtype=np.float32))
print(ps.check.reflector(my_reflector, magnitude=1e200, name="my_reflector at 1e200"))
print(ps.check.reflector(my_reflector, magnitude=1e-200, name="my_reflector at 1e-200"))

# %% [markdown]
# ### Exercise 08.rank-two-update (core, 2 points)
#
# Phase 4 of a step replaces $A$ by $A - q u^T - u q^T$ (section 2): every entry changes, and
# the result is symmetric again. Write the kernel `my_update(A, u, q)` for a batch of matrices
# `A` of shape `(batch, n, n)` with vectors `u` and `q` of shape `(batch, n)`, float64: block
# `m` updates matrix `m` in place, and **thread `j` owns column `j`** (section 3.1), so that the
# threads of a warp touch consecutive addresses and no two threads write one entry. The launch
# is given: one block of 64 threads per matrix, $n \le 64$. In numpy:
# `A - q[:, :, None] * u[:, None, :] - u[:, :, None] * q[:, None, :]`.
#
# The check runs it on batches of matrices of 1 to 64 rows, traced, and allows a thread at most
# $6 \cdot 64$ memory accesses: a column each, not the whole matrix for one thread.

# %% tags=["exercise"] exercise_id="08.rank-two-update" points=2 todo="my_update: thread j of block m replaces column j of A[m] by the same column of A[m] - q u^T - u q^T (u, q of matrix m), for every row; threads j >= n do nothing"
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


# %% tags=["check"] exercise_id="08.rank-two-update"
def rank_two_cases():
    for batch, n in ((1, 1), (2, 2), (3, 5), (2, 16), (2, 33), (1, 64)):
        rng_case = np.random.default_rng(100 * n + batch)
        M = rng_case.normal(size=(batch, n, n))
        yield (M + M.transpose(0, 2, 1)) / 2, rng_case.normal(size=(batch, n)), rng_case.normal(size=(batch, n))


print(ps.check.function(my_rank_two, lambda A, u, q: A - (q[:, :, None] * u[:, None, :] + u[:, :, None] * q[:, None, :]),
                        list(rank_two_cases()), name="my_update", budget=ps.check.Budget(accesses_per_step=6 * 64)))

# %% [markdown]
# ### Exercise 08.parallel-norm (stretch, 2 points)
#
# Phases 1 and 3 of a step sum over up to $n$ entries, and in the shared-memory kernel one
# thread does it while the others wait at the next barrier. The global-memory path (one matrix
# per block, section 6.1) shares such a sum among all the threads of the block: a **tree
# reduction** in shared memory, $\log_2(\text{threads})$ halvings, each behind a barrier (the
# classic reduction of Harris's "Optimizing parallel reduction in CUDA"; the up-sweep of chapter
# 03's Blelloch scan is the same tree). Write the kernel `my_squared_norms(X, h)`: block `b`
# computes `h[b] = (X[b] ** 2).sum()` for a batch `X` of shape `(batch, n)`, float64, with 64
# threads per block. Each thread's partial sum over entries `t, t + 64, ...` is given; combine
# the 64 partials with the tree and let one thread write the total.
#
# The check runs it on 1 to 300 entries and allows at most 8 barriers per thread and 16 memory
# accesses between two barriers: one thread adding up the 64 partials fails.

# %% tags=["exercise"] exercise_id="08.parallel-norm" points=2 todo="my_squared_norms: combine the 64 partial sums of the block into their total in log2(64) steps, every step shared by the threads and behind a barrier, and write the total to h[b]"
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


# %% tags=["check"] exercise_id="08.parallel-norm"
norm_cases = [(np.random.default_rng(n).normal(size=(batch, n)),) for batch, n in ((1, 1), (2, 2), (3, 63), (2, 64), (2, 65), (1, 300))]
print(ps.check.function(my_norms, lambda X: (X ** 2).sum(axis=1), norm_cases, name="my_squared_norms",
                        budget=ps.check.Budget(barriers=8, accesses_per_step=16)))

# %% [markdown]
# ## 6. On the GPU
#
# `benchmarks/householder.py` (the `householder` stage of `bash benchmarks/run_gpu.sh`) ran on
# one GPU, on batches of random symmetric positive definite matrices in float32 and float64,
# and checked every result before timing it (`benchmarks/householder.csv`;
# `benchmarks/README.md` describes the method). Each time is a median of 5, as these calls take
# up to seconds; the CSV's `timing` column says how each row was measured:
#
# - `householder (reduction, events)`: the reduction kernel alone (with the allocation of its
#   outputs) on matrices already on the device, **queued** behind a short busy kernel between
#   two CUDA events: the GPU's work, without the host's cost of launching it;
# - `householder (whole call)` and `solve_symmetric (whole call)`: the package's functions as a
#   user calls them, from host arrays to host arrays, on the host clock: everything the call
#   does, the reduction kernel included;
# - `torch.linalg.eigh` and `torch.linalg.solve` (LU with partial pivoting) on tensors already on
#   the device, between CUDA events. These calls wait for the GPU themselves, so they could not
#   be queued ("events, not queued"): their times include the host's part of the call.
#
# The device, the date, the PyTorch version, how each row was timed, and the times, all read
# from the CSV:

# %%
bench_rows = results.read("householder.csv")
print(f"{bench_rows[0]['device']}, {bench_rows[0]['date']}, torch {bench_rows[0]['torch']}; "
      f"every result correct: {all(row['correct'] for row in bench_rows)}")
for what, timing in dict.fromkeys((row["what"], row["timing"]) for row in bench_rows):
    print(f"  {what:<34} timing: {timing}")

REDUCTION, CALL, SOLVE_CALL = "householder (reduction, events)", "householder (whole call)", "solve_symmetric (whole call)"
EIGH, TORCH_SOLVE = "torch.linalg.eigh", "torch.linalg.solve"
WHAT = (REDUCTION, CALL, SOLVE_CALL, EIGH, TORCH_SOLVE)
HEADERS = ("reduction kernel", "householder call", "solve_symmetric", "torch eigh", "torch solve")
DTYPES = ("float32", "float64")
BENCH_CASES = sorted({(row["batch"], row["n"]) for row in bench_rows}, key=lambda case: case[1])


def ms(what, dtype, batch, n):
    """median_us of the one matching row of householder.csv, in milliseconds."""
    return results.value("householder.csv", "median_us", what=what, dtype=dtype, batch=batch, n=n) / 1000


times = {(what, dtype, case): ms(what, dtype, *case) for what in WHAT for dtype in DTYPES for case in BENCH_CASES}
print(f"\nmedian time (ms)\n{'dtype':<8} {'batch x n':>11}" + "".join(f" {h:>17}" for h in HEADERS))
for dtype in DTYPES:
    for case in BENCH_CASES:
        print(f"{dtype:<8} {f'{case[0]} x {case[1]}':>11}" + "".join(f" {times[w, dtype, case]:>17.2f}" for w in WHAT))

# %% [markdown]
# The same as ratios: the whole `householder` call against its reduction kernel (and their
# difference), `eigh` against the reduction kernel, `solve_symmetric` and the reduction kernel
# against `torch.linalg.solve`, and `solve_symmetric`'s whole call against `householder`'s:

# %%
ratios = (("call / kernel", lambda t, c: times[CALL, t, c] / times[REDUCTION, t, c]),
          ("call - kernel (ms)", lambda t, c: times[CALL, t, c] - times[REDUCTION, t, c]),
          ("eigh / kernel", lambda t, c: times[EIGH, t, c] / times[REDUCTION, t, c]),
          ("solve_sym / torch", lambda t, c: times[SOLVE_CALL, t, c] / times[TORCH_SOLVE, t, c]),
          ("kernel / torch solve", lambda t, c: times[REDUCTION, t, c] / times[TORCH_SOLVE, t, c]),
          ("solve_sym / call", lambda t, c: times[SOLVE_CALL, t, c] / times[CALL, t, c]))
print(f"{'dtype':<8} {'batch x n':>11}" + "".join(f" {name:>21}" for name, _ in ratios))
for dtype in DTYPES:
    for case in BENCH_CASES:
        print(f"{dtype:<8} {f'{case[0]} x {case[1]}':>11}" + "".join(f" {ratio(dtype, case):>21.2f}" for _, ratio in ratios))

SMALL = [case for case in BENCH_CASES if case[0] == 10000]
LARGE = (100, 512)


def span(values):
    values = list(values)
    return f"{min(values):.2f} to {max(values):.2f}"


print("\nhouseholder's whole call / its reduction kernel, batches of 10000:",
      span(times[CALL, t, c] / times[REDUCTION, t, c] for t in DTYPES for c in SMALL),
      "| 100 x 512:", span(times[CALL, t, LARGE] / times[REDUCTION, t, LARGE] for t in DTYPES))
print("eigh slower than our reduction kernel in every case:",
      all(times[EIGH, t, c] > times[REDUCTION, t, c] for t in DTYPES for c in BENCH_CASES))
print("eigh at 10000 x 64, per matrix (ms):", ", ".join(
    f"{t} {times[EIGH, t, (10000, 64)] / 10000:.2f}" for t in DTYPES))
print("solve_symmetric's whole call shorter than householder's in every case:",
      all(times[SOLVE_CALL, t, c] < times[CALL, t, c] for t in DTYPES for c in BENCH_CASES))
print("reduction kernel at 100 x 512, float32 / float64:", f"{times[REDUCTION, 'float32', LARGE] / times[REDUCTION, 'float64', LARGE]:.2f}")

# %%
plot_rows = [{"n": row["n"], "ms": row["median_us"] / 1000, "what": row["what"]}
             for row in bench_rows if row["dtype"] == "float64" and row["batch"] == 10000]
ax = ps.viz.throughput(plot_rows, x="n", y="ms", group="what",
                       title=f"10,000 float64 matrices, {bench_rows[0]['device']}: time against n")
_ = ax.set_ylabel("median time (ms)")

# %% [markdown]
# At $n = 512$ the package takes the global-memory path: one block per matrix, with (as
# `_tridiagonalize` chooses) as many threads as $n$ rounded up to whole warps, at most
# `GLOBAL_THREADS`. A rough count of the longest path through the kernel, from the code of
# section 3: the serial loops of `reflector` and `correct` (about $4i$ iterations at step $i$,
# in one thread while the others wait), plus the column loops of `project`, `update` and
# `accumulate` of thread 0, which owns the most columns. Divided into the reduction kernel's
# time, it gives a time per loop iteration (an estimate from the code, not a profile):

# %%
n_big = LARGE[1]
threads_big = min(-(-n_big // 32) * 32, hh._common.GLOBAL_THREADS)
columns = range(0, n_big, threads_big)  # thread 0's columns
serial = sum(4 * i for i in range(2, n_big))  # reflector: scale and h; correct: u.p and q
column_loops = sum(4 * i * sum(1 for j in columns if j < i) for i in range(1, n_big))  # project i, update i, accumulate 2i
print(f"n = {n_big}: {threads_big} threads per matrix, thread 0 owns columns {list(columns)}")
print(f"loop iterations on the longest path (millions): serial {serial / 1e6:.2f}, thread 0's columns {column_loops / 1e6:.2f}, "
      f"total {(serial + column_loops) / 1e6:.2f}")
for dtype in DTYPES:
    print(f"{dtype}: reduction kernel (ms) {times[REDUCTION, dtype, LARGE]:.2f}, "
          f"ns per iteration {times[REDUCTION, dtype, LARGE] * 1e6 / (serial + column_loops):.0f}")

# %% [markdown]
# What the numbers say (every figure below is printed by the cells above; float64 unless
# noted):
#
# - **Against `torch.linalg.eigh`, many small matrices.** Our reduction kernel takes 0.28 ms,
#   1.92 ms and 11.67 ms for 10,000 matrices of 16, 32 and 64; `eigh` takes 2.75 ms, 8.96 ms and
#   **7447.73 ms**: about 10, 4.7 and 638 times longer (float32 at 64: 8.44 ms against 7961.83 ms).
#   `eigh` is slower than our kernel in every case of the table. The jump between 32 and 64 is
#   PyTorch's. In its source as we read it (`linalg_eigh_cusolver` in
#   `aten/src/ATen/native/cuda/linalg/BatchLinearAlgebraLib.cpp`; a reading, not a measurement)
#   a batch of matrices up to $n = 32$ goes to cuSOLVER's batched Jacobi solver, and larger ones
#   are solved **one matrix after another** (`syevd`, or `syevj` for float32 up to 512): here
#   0.74 ms a matrix (float32: 0.80 ms), 10,000 times. The comparison is not like for like:
#   `eigh` computes all eigenvalues and eigenvectors; our kernel only the first part of that
#   work, $T$ and $Q$ (`syevd` itself starts with such a reduction; Jacobi does not reduce at
#   all). An eigensolver built on our reduction would still have to solve the tridiagonal
#   eigenproblem.
# - **Against `torch.linalg.solve`.** `solve_symmetric` takes 515.98 ms for 10,000 systems of 64;
#   `torch.linalg.solve` 3.41 ms, 151 times less. Even our reduction kernel alone is 3.42 times
#   torch's solve there (between 1.9 and 4.2 times on the batches of 10,000, and 47 to 49 times at
#   $n = 512$). For one solve, LU needs $\frac23 n^3$ flops, our route about $\frac{10}{3} n^3$
#   (section 7). The Householder route pays off when $T$ itself is wanted: eigenvalues, or
#   shifted systems $(A - \sigma I) x = b$ for many $\sigma$ (question 4).
# - **The whole call against the kernel.** On the batches of 10,000, `householder`'s whole call
#   takes 46 to 120 times as long as its reduction kernel: 708.61 ms against 11.67 ms at
#   $n = 64$, a difference of about 697 ms. At $n = 512$, where the kernel itself is slow, the
#   call takes 2.1 to 2.3 times the kernel. Besides the kernel, the call (`householder` in
#   `prefixsum/tridiag/householder.py`, as it was then) checked on the host that $A$ is finite and symmetric,
#   copies $A$ to the device, and copies $d$, $e$ and $Q$ back; `solve_symmetric`, which returns $x$ instead of $Q$ and runs
#   two more small kernels and PCR, takes less time than `householder` in every case (0.73 to
#   0.96 of it). The CSV times only the whole calls and the kernel, so it does not say how the
#   difference divides among these steps (question 6).
# - **$n = 512$, 100 matrices: the global-memory path.** Reduction kernel 307.43 ms, `eigh`
#   478.90 ms (float32: 276.22 ms against 1459.86 ms); `torch.linalg.solve` 6.22 ms. Here our
#   kernel is slow: one block of 256 threads per matrix, and 100 blocks are fewer than the
#   GPU's multiprocessors (132 on an H100 SXM), so the kernel time is the time of one matrix. In
#   each step one thread computes the scale and $h$ (`reflector`) and then $u \cdot p$ and $q$
#   (`correct`), loops of length $i$, while the other 255 threads wait at the barrier: **the
#   serial part of this kernel** as it was measured here (section 6.1 replaces it). The count above puts some 1.44
#   million loop iterations on the longest path, about 190 (float32) to 210 (float64) ns each:
#   of the order of a global-memory access's latency, not of a multiply-add's time, with only 8
#   warps per multiprocessor to hide it. That float32 takes nearly as long as float64 (0.90 of
#   its time) fits this picture; the counts are an estimate from the code, not a profile.

# %% [markdown]
# ### 6.1 Without the host in the way
#
# The whole calls above were measured before `householder` and `solve_symmetric` changed:
# they checked on the host that $A$ is finite and symmetric (most of the 708 ms at 10,000 × 64),
# took only host arrays, and the global path summed with one thread. Now they accept device
# arrays and return device arrays (numpy in, numpy out as before, with one transfer each way);
# the check runs on the device, one block per matrix (`check_matrices`: the largest magnitude
# by a block-wide tree, then every pair $a_{ij}, a_{ji}$ against the bound, the first failing
# entry found by an atomic minimum), and only one number per matrix comes back; in the global
# path the whole block shares the sums of `reflector` and `correct` (`block_sum`, exercise
# 08.parallel-norm; the instructor's version prints the package's code here):

# %% tags=["instructor"]
print(inspect.getsource(hh.block_sum))

# %%
print(inspect.getsource(hh.correct_parallel))

# %% [markdown]
# `benchmarks/householder.py --calls` (the `householder_calls` stage) measured the calls again,
# from device arrays (results left on the device, synchronized) and from numpy arrays, beside the
# reduction kernel, in one run (`benchmarks/householder_calls.csv`):

# %%
calls_rows = results.read("householder_calls.csv")
print(f"{calls_rows[0]['device']}, {calls_rows[0]['date']}; every result correct: {all(r['correct'] for r in calls_rows)}")
CALLS = ("householder (reduction, events)", "householder (whole call, device arrays)", "householder (whole call, numpy)",
         "solve_symmetric (whole call, device arrays)", "solve_symmetric (whole call, numpy)")
CALL_CASES = sorted({(row["batch"], row["n"]) for row in calls_rows}, key=lambda case: case[1])
call_ms = {(what, t, c): results.value("householder_calls.csv", "median_us", what=what, dtype=t, batch=c[0], n=c[1]) / 1000
           for what in CALLS for t in DTYPES for c in CALL_CASES}
print(f"\n{'median (ms)':<20}{'kernel':>10}{'hh device':>11}{'hh numpy':>10}{'solve dev':>11}{'solve np':>10}"
      f"{'hh device / kernel':>20}")
for t in DTYPES:
    for c in CALL_CASES:
        print(f"{t:<8} {f'{c[0]} x {c[1]}':>11}" + "".join(f"{call_ms[w, t, c]:>10.2f} " for w in CALLS)
              + f"{call_ms[CALLS[1], t, c] / call_ms[CALLS[0], t, c]:>19.2f}")
big = ("float64", (10000, 64))
print(f"\n10000 x 64 float64: whole call from device arrays / kernel = {call_ms[CALLS[1], big[0], big[1]] / call_ms[CALLS[0], big[0], big[1]]:.2f}"
      f" (target: at most 2); from numpy / kernel = {call_ms[CALLS[2], big[0], big[1]] / call_ms[CALLS[0], big[0], big[1]]:.1f}; "
      f"before: {times[CALL, big[0], big[1]]:.0f} ms from numpy")
print("n = 512 reduction kernel, before -> now (ms):",
      "; ".join(f"{t} {times[REDUCTION, t, (100, 512)]:.0f} -> {call_ms[CALLS[0], t, (100, 512)]:.0f}" for t in DTYPES))

# %% [markdown]
# From device arrays, a call now costs little beyond its kernel: at 10,000 × 64 the difference is
# the symmetry check (one pass over the matrices and one comparison of each pair) and the launches.
# From numpy arrays the transfers dominate: $A$ in and $Q$ out are each 327 MB in float64,
# through pageable host memory. At $n = 512$ the block-wide sums made the float32 reduction faster
# but not the float64 one: every sum now costs $\log_2 256 = 8$ more barriers, against loops
# that were $i$ long in one thread; the longest path is shorter, the barriers more numerous.

# %% [markdown]
# ## 7. Summary
#
# Per matrix of size $n$, one thread per column (the shared-memory path):
#
# | | reduction (`tred2`'s first loop) | accumulating $Q$ | solve $Q T Q^T x = b$ |
# | --- | --- | --- | --- |
# | work (multiply-adds) | $n^3$: $p$ ($i^2$) and the rank-2 update of the whole $i \times i$ block ($2i^2$) per step; LAPACK updates one triangle, $\frac23 n^3$ | $\frac23 n^3$ | reduction and $Q$, then $2n^2$ for $Q^T b$ and $Q z$, and the tridiagonal solve's $O(n)$ (chapter 07's hybrid) |
# | depth | $n-1$ steps of 4 phases (the last one trivial), each $O(i)$ serial: $O(n^2)$ | $n-1$ phases of $O(i)$: $O(n^2)$ | $O(n)$ per product; the tridiagonal solve's chunk sweeps of $R$ rows and $\log_2 (n / R)$ shuffle steps (chapter 07, section 12.1) |
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
#    addresses would the threads of a warp touch)?
# 3. In the shared-memory path one thread sums $h$ and $u \cdot p$ while the others wait; the
#    global path now uses a block-wide tree (`block_sum`, section 6.1). How many barrier phases
#    does the tree add per step, and how much shorter is the longest path at $n = 512$ with 256
#    threads? Why does the shared path, with several matrices in a block, not use it as it is?
# 4. Once $A = Q T Q^T$ is known, how much does solving $(A - \sigma I) x = b$ cost for a new
#    shift $\sigma$? Compare with a new LU factorisation of $A - \sigma I$.
# 5. Why are the last row and column of $Q$ those of the identity? Which would it be if the
#    reduction went from the first row down?
# 6. Section 6 found `householder`'s old whole call many times slower than its reduction kernel
#    on the batches of 10,000 matrices; section 6.1 moved the check to the device. List what
#    the call from numpy arrays still does besides the kernel (read `householder` and
#    `_check_matrices` in `prefixsum/tridiag/householder.py`) and estimate each step's time from
#    the bytes it moves. What would pinned host memory change?
