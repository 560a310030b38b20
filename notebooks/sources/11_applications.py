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
# # 11 · Scans with your own operator, and what they build
#
# A scan is worth learning because **any associative operator** can ride on it
# ([Blelloch 1990](../docs/references.md#blelloch-1990), *Prefix sums and their applications*). The
# earlier chapters used four: add, mul, max, min. This one hands the operator to you, and then
# builds with it: a linear recurrence is a scan of affine maps; stream compaction and radix sort
# are scans of flags ([Sengupta et al. 2007](../docs/references.md#sengupta-harris-zhang-and-owens-2007));
# a tridiagonal solve is three scans, of $2 \times 2$ matrices and affine maps
# ([Stone 1973](../docs/references.md#stone-1973)), while the obvious single scan of the solution's
# recurrence fails; a cubic spline needs a tridiagonal solve for its second derivatives and a
# scan for its antiderivative. Chapter 05's lecture notes are one chapter of a book whose next
# chapters were *"Manipulation of piecewise polynomial functions in parallel"* and *"... of
# localized piecewise polynomial functions"*; only their titles survive. Section 7 is a small
# piece of what they promised. Every work cited is on the [references page](../docs/references.md).
#
# Every application lives in `prefixsum.apps`, a few lines on top of `ps.scan` and
# `prefixsum.tridiag`; each section shows it, draws it, and checks it against numpy or scipy.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import matplotlib.pyplot as plt
import numpy as np
import scipy.interpolate
import scipy.linalg
import scipy.signal
from numba import cuda

from prefixsum import apps, viz
from prefixsum.cli import results
from prefixsum.scans import ladder, user_ops

print(ps.device_info())

# %% [markdown]
# ## 1. Your own operator
#
# `ps.scan(x, op, identity=...)` takes `op`, a numba device function of two elements returning
# one, and its identity. An element may be a **tuple**: `x = (a, b)` is the sequence of pairs
# `(a[i], b[i])`, stored as two arrays (a *structure of arrays*), and `op` takes and returns
# tuples. The first example is the one this chapter keeps coming back to: the affine map
# $f_i(x) = a_i x + b_i$, stored as the pair $(a_i, b_i)$. Applying $p$ and then $q$ gives
#
# $$x \mapsto q_a (p_a x + p_b) + q_b = (p_a q_a)\, x + (q_a p_b + q_b),$$
#
# again an affine map. **Why it is associative:** it is the composition of functions, and
# $(h \circ g) \circ f = h \circ (g \circ f)$ holds for any functions, since both sides send $x$
# to $h(g(f(x)))$. It is *not* commutative ($p$ then $q$ is not $q$ then $p$), and it need not be:
# every scan in the package combines the earlier element on the left, whatever the grouping.
# The identity is the map $x \mapsto x$, the pair $(1, 0)$.

# %% tags=["setup"]
@cuda.jit(device=True)
def affine(p, q):  # apply p, then q: x -> q.a * (p.a * x + p.b) + q.b
    return (p[0] * q[0], q[0] * p[1] + q[1])


n = ps.size_for_device(simulator=1000, gpu=1 << 22)
rng = np.random.default_rng(10)
a, b = rng.uniform(0.5, 1.0, n), rng.normal(size=n)
A, B = ps.scan((a, b), affine, identity=(1.0, 0.0))

# B[i] is x[i] of x[i] = a[i] x[i-1] + b[i] from x[-1] = 0; A[i] = a[0] * ... * a[i].
x, loop = 0.0, np.empty(min(n, 1000))
for i in range(len(loop)):
    x = a[i] * x + b[i]
    loop[i] = x
print("B is the recurrence:", np.allclose(B[:len(loop)], loop, rtol=1e-12, atol=1e-12))
print("A is the running product:", np.allclose(A, np.cumprod(a), rtol=1e-10))

# %% [markdown]
# **How it runs.** The built-in kernels keep one value per lane in one shared array. A tuple
# needs one shared array per field, and one load and store per field, but nobody writes a
# second kernel for it: `prefixsum.primitives.fields` rewrites the syntax tree of the
# algorithm's one readable kernel. Every array that holds elements becomes one array per field
# (`rungs` becomes `rungs__0, rungs__1`), reading `rungs[t]` gives the tuple
# `(rungs__0[t], rungs__1[t])`, storing a tuple stores it field by field, and everything else
# (indices, barriers, the calls of `combine`) stays as written. Here is the ladder's tile kernel
# (chapter 01), which the built-in operators compile as it is, and below it the kernel the
# package generates from it for pairs (your operator is its `combine`):

# %%
print(inspect.getsource(ladder.ladder_tile_kernel))

# %%
operator = user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64")] * 2, False)
kernel = ladder.ladder_tile_kernel(operator, operator.dtypes, True, False, 32)
print(inspect.getsource(getattr(kernel, "py_func", getattr(kernel, "fn", kernel))))

# %% [markdown]
# The registry says which algorithms carry a user operator (`Algorithm.fields`); `"auto"`
# picks the best-ranked of them, and the others refuse with a clear error. The tracer counts a
# user operator's calls as combines, as it does the built-in ones:

# %%
print("carry a user operator:", ", ".join(alg.name for alg in user_ops.carriers()))
# Each cell draws from a generator of its own: rng has drawn a device-sized n above, so its
# later draws (b[:256] too) differ between the simulator and a GPU.
rng_pairs = np.random.default_rng(8)
pairs = (rng_pairs.uniform(0.5, 1.0, 256), rng_pairs.normal(size=256))
try:
    ps.scan(pairs, affine, identity=(1.0, 0.0), algorithm="kstep")
except ValueError as error:
    print("kstep:", error)
run = ps.trace.record(lambda: ps.scan(pairs, affine, identity=(1.0, 0.0), algorithm="blelloch", block_size=128))
counts = run.counts()
print(f"blelloch, 256 pairs: {counts['combines']} combines, {counts['launches']} launch(es), "
      f"races: {len(run.races())}")

# %% [markdown]
# **Associativity is your job, and the checker tests it.** A parallel scan regroups the combines
# (a tree inside a tile, then the tiles' totals), so an operator that is not associative gives
# an answer that depends on the algorithm and the block size. `ps.check.operator` tries the
# two groupings and the identity on random elements of small integers (exact in every dtype,
# so rounding can neither hide nor fake a failure). Saturating addition, `min(max(p + q, -3), 3)`,
# looks harmless, and is not associative:

# %%
@cuda.jit(device=True)
def saturating_add(p, q):
    return min(max(p + q, -3.0), 3.0)


print(ps.check.operator(affine, (1.0, 0.0), (np.float64, np.float64)))
print(ps.check.operator(saturating_add, 0.0))

# %% [markdown]
# ### Exercise 11.argmax-operator (warm-up, 1 point): the running maximum with its index
#
# Write `running_argmax(p, q)` for elements `(value, index)`: the result is the element with
# the larger value, and on a tie the one with the **smaller index**. Then
# `ps.scan((values, np.arange(n)), running_argmax, identity=...)` gives, at every `i`, what
# `np.argmax(values[:i+1])` gives: the maximum and where it first occurs. Two inputs make that
# harder than it looks. **-inf**: an array of nothing but -inf has its maximum at index 0, so the
# identity cannot be `(-inf, -1)` (it would tie with `(-inf, 0)` and win); it is
# `(-inf, BIG)` with `BIG` the largest int64, which loses every tie. **NaN**: numpy's argmax
# returns the first NaN, so a NaN beats every number, and of two NaNs the smaller index wins.
# With these rules the operator picks the first of an order on the elements, whichever side
# each comes from: why does that make it associative (what does each grouping return for three
# elements)?

# %% tags=["exercise"] exercise_id="11.argmax-operator" points=1 todo="return the element that np.argmax would pick of the two: the larger value, the smaller index on a tie, and a NaN before any number (of two NaNs, the smaller index)"
ARGMAX_IDENTITY = (-np.inf, np.iinfo(np.int64).max)


@cuda.jit(device=True)
def running_argmax(p, q):
    ### BEGIN SOLUTION
    if p[0] != p[0] or q[0] != q[0]:  # a NaN: the first NaN wins, as in np.argmax
        if q[0] == q[0] or (p[0] != p[0] and p[1] < q[1]):
            return p
        return q
    return q if q[0] > p[0] or (q[0] == p[0] and q[1] < p[1]) else p
    ### END SOLUTION

# %% tags=["check"] exercise_id="11.argmax-operator"
identity_of_argmax = (-np.inf, np.iinfo(np.int64).max)  # the check's own: whatever the cell's ARGMAX_IDENTITY says
as_operator = ps.check.operator(running_argmax, identity_of_argmax, (np.float64, np.int64), name="running_argmax")
print(as_operator)
in_a_scan = ps.check.scan(lambda x: ps.scan(x, running_argmax, identity=identity_of_argmax), op=running_argmax,
                          identity=identity_of_argmax, dtype=(np.float64, np.int64), sizes=(1, 2, 33, 300),
                          name="running_argmax")
print(in_a_scan)


def first_indices_of_maxima(values):
    return ps.scan((values, np.arange(values.size)), running_argmax, identity=identity_of_argmax)[1]


def with_inf_and_nan(n, seed):
    """Rounded normals (ties occur), a fifth of them -inf and a twentieth NaN, at random places."""
    rng_special = np.random.default_rng(seed)
    values = np.round(rng_special.normal(size=n), 1)
    values[rng_special.random(n) < 0.2] = -np.inf
    values[rng_special.random(n) < 0.05] = np.nan
    return values


argmax_cases = ([(np.round(np.random.default_rng(n).normal(size=n), 1),) for n in (2, 33, 64, 300)]  # ties
                + [(np.full(n, -np.inf),) for n in (1, 40)] + [(np.array([-np.inf, np.nan, 1.0, np.nan]),)]
                + [(with_inf_and_nan(n, n),) for n in (33, 300)])
print(ps.check.function(first_indices_of_maxima, lambda v: np.array([np.argmax(v[:i + 1]) for i in range(v.size)]),
                        argmax_cases, name="running_argmax, as np.argmax of every prefix (ties, -inf, NaN)"))

# %% [markdown]
# ## 2. Linear recurrences and IIR filters
#
# `apps.linear_recurrence(a, b, x0)` is section 1's scan, with $x_{-1} = x_0$ folded into the
# first map. A first-order IIR filter, $y_n = b_0 x_n - a_1 y_{n-1}$, is the recurrence with
# $a_i = -a_1$; a second-order one needs two previous outputs, so its state is the pair
# $(y_n, y_{n-1})$ and its step the 2-D affine map
#
# $$\begin{pmatrix} y_n \\ y_{n-1} \end{pmatrix} = \begin{pmatrix} -a_1 & -a_2 \\ 1 & 0
# \end{pmatrix} \begin{pmatrix} y_{n-1} \\ y_{n-2} \end{pmatrix} + \begin{pmatrix} w_n \\ 0
# \end{pmatrix},$$
#
# where $w$ is the feed-forward part ($b$ convolved with $x$). Six fields per element (the
# matrix and the vector): `apps.recurrences.affine2` composes them, associative for the same
# reason as before. `apps.lfilter` does orders 1 and 2 and agrees with `scipy.signal.lfilter`:

# %%
print(inspect.getsource(apps.recurrences.affine2))

m = ps.size_for_device(simulator=400, gpu=1 << 16)
t = np.arange(m)
noisy = np.sin(2 * np.pi * t / 100) + np.random.default_rng(16).normal(size=m) * 0.5
lowpass_b, lowpass_a = scipy.signal.butter(2, 0.05)
ours = apps.lfilter(lowpass_b, lowpass_a, noisy)
theirs = scipy.signal.lfilter(lowpass_b, lowpass_a, noisy)
first_order = apps.lfilter([0.1], [1.0, -0.9], noisy)
print("second order (Butterworth) as scipy.signal.lfilter:", np.allclose(ours, theirs, atol=1e-10))
print("first order as scipy.signal.lfilter:", np.allclose(first_order, scipy.signal.lfilter([0.1], [1.0, -0.9], noisy),
                                                           atol=1e-10))
ax = viz.curves(t[:400], {"input": noisy[:400], "apps.lfilter (2nd order)": ours[:400],
                          "scipy.signal.lfilter": theirs[:400]}, title="a low-pass filter as a scan of 2-D affine maps",
                xlabel="n")

# %% [markdown]
# ## 3. Segmented scans
#
# A segmented scan restarts at every flagged element: one launch scans many short sequences of
# different lengths at once. The element is a pair (flag, value), and
#
# $$(f, u) \oplus (g, v) = (f \lor g,\; v \text{ if } g \text{ else } u + v).$$
#
# **Associative** whenever $+$ is: for three elements, if the third is flagged both groupings
# give its value; if only the second is, both give $v + w$; if neither is, both give
# $u + v + w$ (and the flag is the OR of all three either way).

# %%
rng_segments = np.random.default_rng(18)
x = rng_segments.integers(1, 10, 20)
flags = np.zeros(20, np.int32)
flags[[0, 4, 5, 11, 17]] = 1
print("x      ", x)
print("flags  ", flags)
print("add    ", apps.segmented_scan(x, flags))
print("max    ", apps.segmented_scan(x, flags, "max"))
k = ps.size_for_device(simulator=2000, gpu=1 << 20)
x, flags = rng_segments.integers(-5, 6, k), (rng_segments.random(k) < 0.05).astype(np.int32)
pieces = np.split(x, np.flatnonzero(flags))
print("as numpy per segment:", np.array_equal(apps.segmented_scan(x, flags),
                                              np.concatenate([np.cumsum(p) for p in pieces if p.size])))

# %% [markdown]
# ## 4. Stream compaction
#
# Keep the elements whose flag is set, in order (`x[mask]` in numpy). Each kept element's place
# in the output is the number of kept elements before it: the **exclusive scan** of the 0/1
# flags. One scatter writes every kept element there. No two kept elements get the same place,
# so the scatter has no race; the total (last place plus last flag) is the output's length.

# %% tags=["instructor"]
print(inspect.getsource(apps.compaction.scatter_kept))

# %%
small = np.arange(16)
keep = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1], bool)
ax = viz.compaction(small, keep)
print("compact:", apps.compact(small, keep))

n = ps.size_for_device(simulator=3000, gpu=1 << 22)
rng_compact = np.random.default_rng(22)
x, mask = rng_compact.normal(size=n), rng_compact.random(n) < 0.3
print("apps.compact is x[mask]:", np.array_equal(apps.compact(x, mask), x[mask]))

# %% [markdown]
# ### Exercise 11.compact (core, 2 points): the scatter
#
# Write the kernel `my_scatter(x, flags, places, out)`, one thread per element of `x`:
# afterwards `out` holds the kept elements of `x` (those whose flag is 1), in their order, and
# nothing else. `my_compact` around it computes the flags, scans them (`places` is their
# exclusive scan: how many kept elements come before each one) and allocates `out`, exactly as
# long as the number kept.
#
# **Worked example.** Eight elements, four of them kept:
#
# | `i` | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `x` | a | b | c | d | e | f | g | h |
# | `flags` | 1 | 0 | 0 | 1 | 1 | 0 | 1 | 0 |
# | `places` | 0 | 1 | 1 | 1 | 2 | 3 | 3 | 4 |
# | writes `out` at | 0 | | | 1 | 2 | | 3 | |
#
# `out` is `a d e g`. No two threads write one cell of `out`, and the threads of dropped
# elements write nothing (their places belong to the next kept element). The checker launches it
# itself, with its own flags, places and `out` and 128 threads a block, on many sizes, with
# poisoned memory, traces it, and allows a thread of `my_scatter` at most 4 memory accesses: one
# thread per element.

# %% tags=["exercise"] exercise_id="11.compact" points=2 todo="thread i puts x[i] in its place in out if it is kept, and does nothing otherwise"
@cuda.jit
def my_scatter(x, flags, places, out):
    i = cuda.grid(1)
    ### BEGIN SOLUTION
    if i < x.shape[0] and flags[i]:
        out[places[i]] = x[i]
    ### END SOLUTION


def my_compact(x, mask):
    flags = mask.astype(np.int32)
    places = ps.exclusive_scan(flags)
    out = cuda.device_array(int(places[-1] + flags[-1]) if len(x) else 0, x.dtype)
    threads = 128
    my_scatter[max(1, -(-len(x) // threads)), threads](cuda.to_device(x), cuda.to_device(flags),
                                                       cuda.to_device(places), out)
    return out


# %% tags=["check"] exercise_id="11.compact"
def compact_by_the_check(x, mask):  # the check launches the kernel itself: its flags, places and out, 128 threads a block
    flags = mask.astype(np.int32)
    places = ps.exclusive_scan(flags)
    out = cuda.device_array(int(places[-1] + flags[-1]) if len(x) else 0, x.dtype)
    my_scatter[max(1, -(-len(x) // 128)), 128](cuda.to_device(x), cuda.to_device(flags), cuda.to_device(places), out)
    return out


print(ps.check.compaction(compact_by_the_check, name="my_scatter",
                          budget=ps.check.Budget(accesses_per_step=4, kernels=("my_scatter",))))

# %% [markdown]
# ## 5. Radix sort
#
# A **split** by bit $k$ moves the elements whose bit is 0 to the front and those whose bit is
# 1 behind them, each group in its old order: a compaction of the zeros followed by one of the
# ones. The exclusive scan of the zero-flags gives a zero its place; a one at $i$ goes to
# $Z + i - z_i$, where $Z$ is the number of zeros and $z_i$ the zeros before $i$. Because a split
# is **stable**, splitting by bit 0, then 1, ..., then $w - 1$ sorts $w$-bit keys: after the
# pass by bit $k$ the keys are in order of their $k + 1$ lowest bits (least significant digit
# first, LSD). Signed integers and floats first become unsigned keys of the same order (flip
# the sign bit; for a negative float flip every bit, since IEEE 754 orders negative floats
# backwards); the sort also skips the bits that all keys share, found by a scan of
# (OR, AND) pairs, one more user operator. This readable version is `apps.radix_sort_one_bit`;
# `apps.radix_sort` is the single-pass one of section 8.

# %%
keys = np.array([5, 2, 7, 4, 1, 6, 3, 0], np.uint32)
fig, axes = plt.subplots(3, 1, figsize=(8, 7))
for bit, ax in enumerate(axes):
    viz.radix_pass(keys, bit, bits=3, ax=ax)
    keys = apps.split_by_bit(cuda.to_device(keys), bit)[0].copy_to_host()
print("after 3 passes:", keys)

n = ps.size_for_device(simulator=200, gpu=1 << 20)
rng_keys = np.random.default_rng(28)
for dtype in ("int32", "uint64", "float32"):
    kind = np.dtype(dtype).kind
    keys = ((rng_keys.normal(size=n) * 1e3).astype(dtype) if kind == "f"
            else rng_keys.integers(-1000 if kind == "i" else 0, 1000, n).astype(dtype))
    values = np.arange(n)
    sorted_keys, order = apps.radix_sort_one_bit(keys, values)
    stable = np.argsort(keys, kind="stable")
    print(f"{dtype:>8}: as np.sort, values moved as np.argsort(kind='stable'):",
          np.array_equal(sorted_keys, keys[stable]) and np.array_equal(order, stable))

# %% [markdown]
# ### Exercise 11.radix-pass (stretch, 2 points): one split
#
# Write `my_split(keys, bit)`: flag the keys whose bit `bit` is 0, scan the flags
# (`ps.exclusive_scan`), and scatter every key to its place, zeros first, both groups in order:
# one thread per key, at most 8 memory accesses each.
#
# **Worked example.** The first pass of section 5's picture, by bit 0, on the keys
# $5, 2, 7, 4, 1, 6, 3, 0$: four keys have bit 0 equal to 0, so they take places 0..3 and the
# others places 4..7, each group in its old order.
#
# | `i` | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `keys[i]` | 5 | 2 | 7 | 4 | 1 | 6 | 3 | 0 |
# | bit 0 is 0 (`flags`) | 0 | 1 | 0 | 1 | 0 | 1 | 0 | 1 |
# | zeros before `i` (`zeros_before`) | 0 | 0 | 1 | 1 | 2 | 2 | 3 | 3 |
# | place of `keys[i]` | 4 | 0 | 5 | 1 | 6 | 2 | 7 | 3 |
#
# `out` is $2, 4, 6, 0, 5, 7, 1, 3$. The places are a permutation of $0..n-1$, so every cell of
# `out` is written exactly once.
#
# The check launches `my_split_scatter` itself, with its own flags and scan, and then runs your
# `my_split`, whose result must be written by its kernels (a kernel of your own for the flags is
# welcome), not computed on the host.

# %% tags=["exercise"] exercise_id="11.radix-pass" points=2 todo="my_split: find for every key its place in a stable split by bit `bit` (the keys whose bit is 0 first, each group in its old order) with one exclusive scan; my_split_scatter: thread i moves keys[i] to its place"
@cuda.jit
def my_split_scatter(keys, flags, zeros_before, out):
    i = cuda.grid(1)
    n = keys.shape[0]
    if i < n:
        zeros = zeros_before[n - 1] + flags[n - 1]
        ### BEGIN SOLUTION
        place = zeros_before[i] if flags[i] else zeros + i - zeros_before[i]
        out[place] = keys[i]
        ### END SOLUTION


def my_split(keys, bit):
    ### BEGIN SOLUTION
    flags = (((keys >> bit) & 1) == 0).astype(np.int32)
    zeros_before = ps.exclusive_scan(flags)
    ### END SOLUTION
    out = cuda.device_array(len(keys), keys.dtype)
    threads = 128
    my_split_scatter[max(1, -(-len(keys) // threads)), threads](cuda.to_device(keys), cuda.to_device(flags),
                                                                cuda.to_device(zeros_before), out)
    return out


# %% tags=["check"] exercise_id="11.radix-pass"
def split_by_the_check(keys, bit):  # the check launches the kernel itself: its flags, zeros_before and out, 128 threads a block
    flags = np.where((keys >> bit) & 1, 0, 1).astype(np.int32)
    zeros_before = (np.cumsum(flags) - flags).astype(np.int32)
    out = cuda.device_array(len(keys), keys.dtype)
    my_split_scatter[max(1, -(-len(keys) // 128)), 128](cuda.to_device(keys), cuda.to_device(flags),
                                                        cuda.to_device(zeros_before), out)
    return out


print(ps.check.radix_pass(split_by_the_check, name="my_split_scatter",
                          budget=ps.check.Budget(accesses_per_step=8, kernels=("my_split_scatter",))))
# my_split itself, as you wrote it: its kernels (yours beside my_split_scatter too) must write every key of the result
print(ps.check.radix_pass(my_split, name="my_split", sizes=(1, 31, 33, 300),
                          budget=ps.check.Budget(accesses_per_step=8, kernels=("my_split_scatter",), device_work=True)))

# %% [markdown]
# ## 6. A tridiagonal solve by scans: Stone's method, and the scan that fails
#
# Gaussian elimination without pivoting factors a tridiagonal $A = LU$ (chapter 07's Thomas
# algorithm): $L$ has ones on its diagonal and $l_i = a_i / u_{i-1}$ below it, $U$ the pivots
# $u_i$ and $c_i$ above them, with
#
# $$u_0 = b_0, \qquad u_i = b_i - \frac{a_i c_{i-1}}{u_{i-1}} = \frac{b_i u_{i-1} - a_i c_{i-1}}{u_{i-1}} .$$
#
# The pivots look like a sequential, nonlinear recurrence, but each step is a **Möbius map**
# $u \mapsto (\alpha u + \beta)/(\gamma u + \delta)$, and composing Möbius maps multiplies their
# matrices $\begin{pmatrix}\alpha & \beta\\ \gamma & \delta\end{pmatrix}$. So with
# $M_i = \begin{pmatrix} b_i & -a_i c_{i-1} \\ 1 & 0 \end{pmatrix}$ and
# $M_0 = \begin{pmatrix} b_0 & 0 \\ 1 & 0\end{pmatrix}$, the prefix product $P_i = M_i \cdots M_0$
# gives every pivot as the ratio of its first column, $u_i = (P_i)_{00} / (P_i)_{10}$: one scan of
# $2 \times 2$ matrices (Stone 1973, whose numbers $q_i$ in $u_i = q_i / q_{i-1}$ are the leading
# minors of $A$). Then $Ly = d$ is $y_i = d_i - l_i y_{i-1}$ and $Ux = y$ is
# $x_i = (y_i - c_i x_{i+1}) / u_i$: two first-order linear recurrences, section 2's scan of
# affine maps, the second one reversed. Three scans, $O(n)$ work, $O(\log n)$ depth
# ([Stone 1973](../docs/references.md#stone-1973); recurrences by recursive doubling:
# [Kogge and Stone 1973](../docs/references.md#kogge-and-stone-1973)). Two details make it a solver. The
# minors grow or shrink geometrically and would leave the floating-point range after some
# hundreds of rows; only the direction of $P_i$ matters, so the operator **scales each product
# by a power of two** that puts its largest entry in $[0.5, 1)$ (exact, and still associative,
# since a positive scale commutes with matrix products). And a batch is one long sequence in
# which each system's first row raises a flag that discards everything before it, as section 3's
# segmented scan does. `apps.stone_solve(a, b, c, d)` takes what `tridiag.solve` takes; its
# operator is below.
#
# Chapter 07 (section 10) read the system another way: row $i$ gives the next unknown from the
# two before, $x_{i+1} = (d_i - a_i x_{i-1} - b_i x_i) / c_i$, so a scan of $3 \times 3$ matrices
# writes every $x_i$ as $\alpha_i x_0 + \beta_i$, and the last row fixes $x_0$
# (`apps.tridiagonal_scan`, the **shooting** method). Both on chapter 11's systems ($a_i, c_i$
# in $[0.5, 1]$, $b_i$ in $[3, 4]$), against LAPACK (`scipy.linalg.solve_banded`) and
# `tridiag.solve` (chapter 08's hybrid), then the backward error on a positive definite matrix:

# %%
print(inspect.getsource(apps.stone.mobius))


def tridiagonal_errors(rows, rng):
    a, c = rng.uniform(0.5, 1.0, (2, rows))
    b, d = 3 + rng.random(rows), rng.normal(size=rows)
    exact = scipy.linalg.solve_banded((1, 1), np.vstack([np.r_[0, c[:-1]], b, np.r_[a[1:], 0]]), d)
    relative = lambda x: np.abs(x - exact).max() / np.abs(exact).max()  # noqa: E731
    return relative(apps.tridiagonal_scan(a, b, c, d)), relative(apps.stone_solve(a, b, c, d)), relative(ps.tridiag.solve(a, b, c, d))


sizes = [4, 8, 16, 24, 32, 48, 64, 128, 256, 1024]
errors = np.array([tridiagonal_errors(rows, np.random.default_rng(rows)) for rows in sizes])
ax = viz.curves(sizes, {"shooting: scan of 3x3 matrices": np.minimum(np.nan_to_num(errors[:, 0], nan=1e100), 1e100),
                        "Stone: three scans": np.maximum(errors[:, 1], 1e-17),
                        "tridiag.solve (hybrid)": np.maximum(errors[:, 2], 1e-17)}, logy=True,
                xlabel="n", ylabel="relative error vs LAPACK", title="one system, three parallel solvers (errors above 1e100, and NaN, drawn at 1e100)")
print("shooting: error grows by more than 1e6 from n = 8 to n = 48:", errors[5, 0] > 1e6 * errors[1, 0],
      "| finite at n = 1024:", all(np.isfinite(errors[-1:, 0])))
print("Stone's method within 1e-14 of LAPACK at every n:", bool(np.all(errors[:, 1] < 1e-14)))
print("tridiag.solve within 1e-14 of LAPACK at every n:", bool(np.all(errors[:, 2] < 1e-14)))
a4, c4 = -np.ones(1024), -np.ones(1024)  # tridiag(-1, 2 + 1e-4, -1): positive definite, kappa about 4e4
d4 = np.random.default_rng(4).normal(size=1024)
for name, x4 in (("Stone", apps.stone_solve(a4, np.full(1024, 2 + 1e-4), c4, d4)),
                 ("Thomas", ps.tridiag.solve(a4, np.full(1024, 2 + 1e-4), c4, d4, method="thomas"))):
    r4 = (2 + 1e-4) * x4 - d4
    r4[1:] -= x4[:-1]
    r4[:-1] -= x4[1:]
    eta = np.abs(r4).max() / ((4 + 1e-4) * np.abs(x4).max() + np.abs(d4).max())
    print(f"tridiag(-1, 2 + 1e-4, -1), n = 1024, {name}: backward error below 10 eps: {eta < 10 * np.finfo(float).eps}")

# %% [markdown]
# **Why the shooting scan fails.** It solves a boundary-value problem as an initial-value one.
# The homogeneous recurrence $c_i x_{i+1} + b_i x_i + a_i x_{i-1} = 0$ has two independent
# solutions; on a diagonally dominant matrix one of them grows by about $|b_i / c_i| \approx 4.7$
# per row and the other decays. $\alpha_i$, the solution started from $x_0 = 1$, is dominated by
# the growing one, and so is $\beta_i$; the true $x_i$ stays of the size of $d$. So
# $x_i = \alpha_i x_0 + \beta_i$ is a difference of two numbers about $\prod_j |b_j / c_j|$ times
# larger than itself, and their rounding errors, a few $\varepsilon$ of *their* size, become the
# error of $x_i$: it grows geometrically with $n$ (chapter 07, section 10, measures it against
# the growth of $\alpha$), and once $\alpha$ overflows, $x$ is $\infty - \infty$ = NaN. No
# reordering of the additions cures it; the numbers themselves are the problem.
#
# **Why Stone's method does not.** It scans what elimination computes, the pivots, and on a
# dominant or positive definite matrix the pivot maps *contract*: an error in $u_{i-1}$ reaches
# $u_i$ multiplied by $|a_i c_{i-1}| / u_{i-1}^2 < 1$, and both bidiagonal recurrences multiply by
# $|l_i| < 1$ and $|c_i / u_i| < 1$. A tridiagonal solve by scans is as stable as what it scans.
# Stone's method is not quite as stable as sequential elimination, though: its pivots come from
# long products, not from the contracting map applied step by step, and where the map contracts
# slowly (the last lines: a positive definite matrix of condition number about $4 \cdot 10^4$)
# the products' rounding errors move the pivots, and the backward error grows beyond Thomas's,
# while the error stays within $n \varepsilon \kappa$ (the `apps.stone` docstring measures it).
# Like every solver without pivoting it is meant for diagonally dominant or positive definite
# systems, and fails silently off them (chapter 07, section 7).
#
# ## 7. Cubic splines: a tridiagonal solve, then a scan
#
# A cubic spline through $(x_i, y_i)$ is a cubic on each piece $[x_i, x_{i+1}]$, with continuous
# first and second derivatives. With $M_i$ its second derivative at $x_i$ and $h_i$ the piece
# widths, continuity of the first derivative gives the diagonally dominant system
#
# $$h_{i-1} M_{i-1} + 2 (h_{i-1} + h_i) M_i + h_i M_{i+1} = 6\left(\frac{y_{i+1} - y_i}{h_i} - \frac{y_i - y_{i-1}}{h_{i-1}}\right),$$
#
# with $M_0 = M_{n-1} = 0$ for a **natural** spline, or two rows that fix the end slopes for a
# **clamped** one, solved by PCR. Each piece's four coefficients follow in closed form; the
# derivative differentiates them. The **antiderivative** integrates each piece from its left
# end; the constant of piece $i$ is the integral of all the pieces before it, an exclusive scan
# of the pieces' integrals. (CuPy's `PPoly.antiderivative` fixes that continuity with one
# thread walking the pieces.)

# %%
print(inspect.getsource(apps.PiecewisePolynomial.antiderivative))

rng_knots = np.random.default_rng(36)
knots = np.sort(rng_knots.uniform(0, 10, 12))
heights = np.sin(knots) + 0.1 * rng_knots.normal(size=12)
grid = np.linspace(knots[0], knots[-1], 300)
natural = apps.cubic_spline(knots, heights)
clamped = apps.cubic_spline(knots, heights, bc_type=((1, 0.0), (1, 0.0)))
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
viz.curves(grid, {"natural": natural(grid), "clamped (slopes 0)": clamped(grid)}, points=(knots, heights),
           ax=axes[0], title="cubic splines")
viz.curves(grid, {"S": natural(grid), "S'": natural(grid, 1), "S''": natural(grid, 2),
                  "integral of S": natural.antiderivative()(grid)}, ax=axes[1], title="natural spline: derivatives and antiderivative")
for name, ours, bc in (("natural", natural, "natural"), ("clamped", clamped, ((1, 0.0), (1, 0.0)))):
    theirs = scipy.interpolate.CubicSpline(knots, heights, bc_type=bc)
    same = (np.allclose(ours.c, theirs.c, atol=1e-10) and all(np.allclose(ours(grid, nu), theirs(grid, nu), atol=1e-9)
                                                                for nu in (0, 1, 2))
            and np.allclose(ours.antiderivative()(grid), theirs.antiderivative()(grid), atol=1e-9))
    print(f"{name}: coefficients, values, two derivatives and the antiderivative as scipy's CubicSpline: {same}")

# %% [markdown]
# ## 8. At library speed: single-pass versions
#
# Sections 4 and 5 are the readable versions: every pass a scan of n flags plus a scatter,
# launched from Python, the output's length read back in between. The libraries behind torch
# and CuPy (NVIDIA's CUB) run the same algorithms as **single-pass scans**: chapter 10's
# decoupled look-back, carrying a *count* where chapter 10 carried a running sum (a count of
# kept elements is a sum of 0/1 flags). `prefixsum.apps` does the same, calling chapter 10's
# look-back (`prefixsum/primitives/tile_state.py`), not a copy of it:
#
# - **`apps.compact`** (`apps/selection.py`, CUB's `DeviceSelect`): one kernel. A block draws its
#   tile's id from the look-back's counter and loads the flags *striped* (step k: thread t reads
#   element `k * blockDim + t`). In each step a warp takes one **ballot** of its 32 flags; a kept
#   element's rank in the warp is the number of set bits below its lane, and warp 0 scans the
#   (step, warp) counts of the tile. Warp 0 hands the tile's count to `tile_state.look_back`,
#   which returns the kept elements of all tiles before; each kept element goes to
#   `out[before the tile + before its warp's step + its rank]`. `compact_indices` is numpy's
#   `flatnonzero` by the same kernel.
# - **`apps.radix_sort`** (`apps/onesweep.py`, *onesweep*: Adinets and Merrill 2022, CUB's radix
#   sort): 8 bits per pass, so four passes for 32-bit keys, not 32. One kernel first builds the
#   histograms of all four digits. Then one kernel per digit, tile by tile: (1) load the tile warp
#   by warp; (2) the **stable rank** of each key among the keys of its warp with the same digit:
#   `match_any_sync` finds the lanes holding the same digit, the highest of them adds their
#   number to the warp's count of that digit in shared memory, and each learns the count before
#   it by a shuffle plus its peers on lower lanes; (3) one thread per digit: the tile's count of
#   that digit goes through the look-back, **256 counts per tile** (`tile_state.look_back_lane`:
#   the same states, flags and epochs, one thread walking back one tile at a time); (4) every
#   key goes to its digit's start (the histogram's exclusive scan) + the count of earlier tiles +
#   its place in the tile, through shared memory so that keys of one digit are stored side by side.
# - **`apps.segmented_scan`** (`apps/segmented.py`; Blelloch 1990's segmented scan, Sengupta et
#   al. 2007 on GPUs): a scan that restarts at every flagged element is an ordinary scan of
#   (flag, value) pairs under the operator "if the right pair starts a segment take it, else
#   combine": associative, though not commutative. The look-back carries the pair, so a segmented
#   scan is one pass of chapter 10's kernel, inclusive or exclusive, forward or reverse.
#
# Both are stable by construction and read and write each element once per pass, with no reset
# between calls (the look-back's epochs). Keys of every integer and float dtype are sorted by the
# order-preserving map of section 5, with numpy's two extra rules: all NaNs last, and -0.0 equal
# to 0.0 (a stable sort keeps them in their order). The rank of step (2), a device function,
# is exercise 11.digit-rank below. Here: **which tile waited for which digit count**. On the concurrent simulator, 8
# blocks resident at once, started in a shuffled order, with tiles of one warp
# (`onesweep.sort_with`: 32 keys a tile) and 8-bit keys (one digit pass), the trace records every
# read of a tile's digit counts. A thread that read a predecessor's count more than once found
# nothing published there yet, and waited for it:

# %%
rng_onesweep = np.random.default_rng(30)
keys = rng_onesweep.integers(0, 256, 32 * 24).astype(np.uint8)
with ps.sim.block_order_seed(2), ps.sim.resident_blocks(8):
    run = ps.trace.record(apps.onesweep.sort_with, keys, items_per_thread=1)
print("sort_with is np.argsort(kind='stable'):", np.array_equal(run.result, np.argsort(keys, kind="stable")))
reads = collections.Counter()  # (tile, predecessor, digit) -> reads of the predecessor's count
own = {}
for record in run.select(array="status"):
    if record.atomic and record.launch == len(run.launches) - 1:
        own[record.block] = max(own.get(record.block, 0), record.index // 256)
        reads[record.block, record.index // 256, record.index % 256] += 1
waits = collections.defaultdict(list)
for (block, tile, digit), count in reads.items():
    if tile < own[block] and count > 1:
        waits[own[block], tile].append(digit)
print(f"{len(waits)} of {len(own)} tiles waited; the first ones:")
for (tile, predecessor), digits in sorted(waits.items())[:8]:
    print(f"  tile {tile:>2} waited for tile {predecessor:>2}'s counts of {len(digits):>3} digits, "
          f"first {sorted(digits)[:4]}")

# %% [markdown]
# ### Exercise 11.digit-rank (stretch, 2 points): the stable rank inside a warp
#
# Write the device function `my_digit_rank(digit, counts)` of step (2): every lane of a warp
# calls it with the digit of its key, once per step, steps in order; `counts` is the warp's 256
# counts in shared memory (the keys of each digit ranked in earlier steps). Return the number of
# keys of the warp with the same digit *before* the caller: those ranked in earlier steps plus
# those on lower lanes now, and add this step's keys to `counts[digit]`, once per digit. One
# `match_any_sync`, one shuffle; let one lane of each group of peers update the count, and make
# the next step's reader see it. The check sorts uint16 keys (two passes) with your rank, many
# tiles of two warps each (a lane is `cuda.laneid`, not `cuda.threadIdx.x`), and compares the
# order with `np.argsort(kind="stable")`.

# %% tags=["exercise"] exercise_id="11.digit-rank" points=2 todo="return the number of keys of the warp with the caller's digit before it (earlier steps, then lower lanes), and add this step's keys of each digit to counts[digit] once"
@cuda.jit(device=True)
def my_digit_rank(digit, counts):
    ### BEGIN SOLUTION
    peers = np.uint32(cuda.match_any_sync(0xFFFFFFFF, digit))
    leader = 31 - cuda.clz(peers)
    before = 0
    if cuda.laneid == leader:
        before = counts[digit]
        counts[digit] = before + cuda.popc(peers)
    before = cuda.shfl_sync(0xFFFFFFFF, before, leader)
    cuda.syncwarp()
    return before + cuda.popc(peers & cuda.lanemask_lt())
    ### END SOLUTION


# %% tags=["check"] exercise_id="11.digit-rank"
print(ps.check.stable_sort(lambda keys: apps.onesweep.sort_with(keys, block_size=64, rank=my_digit_rank),  # two warps a block
                           name="my_digit_rank"))

# %% tags=["instructor"]
print(inspect.getsource(apps.onesweep.warp_digit_rank))  # the package's rank, which sort_with runs unless given another

# %% [markdown]
# **The measured table.** `benchmarks/applications.py` ran the applications on one GPU against
# torch and CuPy, inputs already on the device, every result checked before it was timed:
# whole calls on the host clock, synchronised (what a user waits for: Python, allocations, the
# launches, the wait; median of 7), and the device time of the same calls by CUPTI
# (`torch.profiler`: every kernel, copy and memset summed). The ratio is the library's whole call
# over ours: above 1, ours is faster. torch has no sort of uint32 on that version; "pairs" sorts
# int32 values with the keys (torch: `torch.sort`, then the values gathered by its indices; CuPy:
# `argsort`, then two gathers). The last column is NVIDIA's CUB itself, called from Python through
# `cuda.compute` (cuda-cccl) with its temporary storage allocated once and kept: `DeviceSelect`
# with the predicate `x > 0` for the compaction (the same half of the elements kept), and
# `DeviceRadixSort` for the sorts. torch and CuPy call CUB too, behind their own dispatch.

# %%
bench = results.read("applications.csv")
print(f"{bench[0]['device']}, {bench[0]['date']}; every result correct: {all(row['correct'] for row in bench)}")


def row_of(task, method, dtype, n):
    found = results.read("applications.csv", task=task, method=method, dtype=dtype, n=n)
    return found[0] if found else None


CUB_SELECT, CUB_SORT = "CUB select x > 0 (cuda.compute, temporary storage kept)", "CUB radix sort (cuda.compute, temporary storage kept)"
TASKS = [("compact", "prefixsum apps.compact", "torch x[mask]", "cupy x[mask]", CUB_SELECT, ("float32", "int32", "float64")),
         ("sort", "onesweep", "torch.sort(stable=True)", "cupy.sort", CUB_SORT, ("uint32", "float32")),
         ("sort pairs", "onesweep", "torch.sort(stable=True)", "cupy.argsort + gathers", CUB_SORT, ("uint32", "float32"))]
LIBRARIES = ("torch", "CuPy", "CUB")
sizes = sorted({row["n"] for row in bench if row["task"] == "sort"})
ratios = collections.defaultdict(list)
print(f"{'task':<10} {'dtype':>7} {'n':>10} | {'ours, us (device)':>18} | {'torch':>18} | {'CuPy':>18} | {'CUB':>18} | "
      + " ".join(f"{library + '/ours':>10}" for library in LIBRARIES))
for task, *methods, dtypes in TASKS:
    for dtype in dtypes:
        for n in sizes:
            cells = [row_of(task, method, dtype, n) for method in methods]
            shown = [f"{c['median_us']:>8.1f} ({c['device_us']:>7.1f})" if c else f"{'-':>18}" for c in cells]
            over = [f"{c['median_us'] / cells[0]['median_us']:.2f}" if c else "-" for c in cells[1:]]
            for library, c in zip(LIBRARIES, cells[1:]):
                if c and dtype in ("float32", "uint32"):
                    ratios[f"{task} {dtype}: {library}/ours"].append(c["median_us"] / cells[0]["median_us"])
            print(f"{task:<10} {dtype:>7} {n:>10,} | {' | '.join(shown)} | " + " ".join(f"{o:>10}" for o in over))
one_bit = row_of("sort", "radix_sort_one_bit (readable, 1 bit/pass)", "uint32", 1 << 22)
readable = row_of("compact", "prefixsum apps.compact_by_scan (readable)", "float32", 1 << 24)
print(f"the readable versions: one bit per pass, 2^22 uint32, {one_bit['median_us'] / row_of('sort', 'onesweep', 'uint32', 1 << 22)['median_us']:.0f}"
      f" times onesweep; compact_by_scan, 2^24 float32, {readable['median_us'] / row_of('compact', 'prefixsum apps.compact', 'float32', 1 << 24)['median_us']:.1f}"
      " times apps.compact")
spline = {row["method"]: row["median_us"] for row in bench if row["task"] == "spline"}
print(f"splines: scipy's build on the CPU takes {spline['scipy CubicSpline (build, CPU)'] / spline['prefixsum cubic_spline (build)']:.1f}"
      f" times ours, its evaluation {spline['scipy evaluate (points, CPU)'] / spline['prefixsum evaluate (points)']:.0f} times;"
      f" cupyx's build takes {spline['cupyx CubicSpline (build)'] / 1e6:.0f} s")
segmented = {row["method"]: row for row in results.read("user_ops_speed.csv", task="segmented", dtype="float32", n=1 << 24)}
ours, theirs = segmented["apps.segmented_scan add inclusive"], segmented["torch: cumsum of flags, nonzero, gather, cumsum"]
print(f"segmented sum, 2^24 float32, device time: torch's formulation {theirs['device_us'] / ours['device_us']:.1f} times"
      f" ours, which is {ours['device_us'] / segmented['torch.cumsum (unsegmented: a lower bound)']['device_us']:.1f}"
      " times an unsegmented torch.cumsum")
ax = viz.curves(np.log2(sizes), {label: np.array(values) for label, values in ratios.items() if len(values) == len(sizes)},
                logy=True, xlabel="log2 n", ylabel="library's whole call / ours",
                title="above 1: ours is faster (whole calls, float32 and uint32)")
ax.axhline(1.0, color="black", linewidth=0.8)
ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")

# %% [markdown]
# Read the table with the chapters behind it. The one-pass compaction moves the flags, the input
# and the kept values once; torch's `x[mask]` counts the flags, copies the count to the host,
# allocates, then selects and gathers in further kernels. The onesweep sort moves every key
# once per byte, as CUB does; where it trails, Nsight Compute (`benchmarks/onesweep_profile.txt`)
# shows a digit pass limited by latency rather than memory: half the threads a multiprocessor
# holds (four blocks, by the registers of 16 keys, their ranks and digits per thread, and by the
# shared tile), warps waiting on shared memory (the ranks, the counts per warp) and on the
# look-back's reads of the L2 cache; DRAM is mostly idle. Its instructions beside CUB's pass
# (`benchmarks/sort_sass.txt`, Nsight Compute's SASS page) say where the time goes: nearly twice
# CUB's instructions per key (more than twice until the digit pass indexed its arrays with unsigned
# integers, which spares numba's wraparound of negative indices, and tested the digit's bits in 32
# bits), and a look-back whose warps walk back twice as many tiles as CUB's before they meet a
# published prefix, now where most of the pass's warps wait. The dotted line
# is half the library's speed. The readable versions of sections 4 and 5 are correct and simple,
# and the last lines say what fusing their passes buys. One row we cannot explain yet: the sort
# with values at 2^20 takes about five times its device time a whole call here, timed in turn
# with the libraries' calls, but little more than the sort of keys alone when the two are timed in
# turn by themselves, on the same kind of GPU (`benchmarks/sort_call_profile.txt`, with the
# profile of its host time). Splines: building costs a PCR solve plus
# numpy arithmetic on the host; evaluation is one kernel (a binary search and Horner's rule per
# point); CuPy's own build spends its time in `BSpline.design_matrix`, at Python's built-in `min`
# over a CuPy array, which brings the elements to the host one comparison at a time.
#
# ### Exercise 11.warp-rank (stretch, 2 points): the rank inside a warp
#
# Write the device function `my_warp_rank(kept)` of the compaction: every lane of a warp calls
# it with its own flag (a bool), and it returns two numbers, how many lanes *below* the caller
# have their flag set (the caller's rank), and how many lanes of the warp have it set. No shared
# memory and no loop: a vote, a mask and a bit count. The check runs `apps.compact` with your
# function in place of the package's, on many sizes, in blocks of two warps (the lanes of the
# second warp are 0 to 31 as well).
#
# **Worked example**, the first 8 lanes of a warp whose other lanes are not kept; the warp's
# vote is one 32-bit word with bit $l$ set where lane $l$'s flag is:
#
# | lane | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `kept` | 1 | 0 | 0 | 1 | 1 | 0 | 1 | 0 |
# | bit of the vote | 1 | 0 | 0 | 1 | 1 | 0 | 1 | 0 |
# | returned rank | 0 | 1 | 1 | 1 | 2 | 3 | 3 | 4 |
# | returned count | 4 | 4 | 4 | 4 | 4 | 4 | 4 | 4 |
#
# Every lane returns the same count, and a kept lane's rank is its place among the warp's kept
# elements.

# %% tags=["exercise"] exercise_id="11.warp-rank" points=2 todo="return (kept lanes below the caller in its warp, kept lanes in the warp), from one vote of the warp"
@cuda.jit(device=True)
def my_warp_rank(kept):
    ### BEGIN SOLUTION
    ballot = np.uint32(cuda.ballot_sync(0xFFFFFFFF, kept))
    return cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)
    ### END SOLUTION


# %% tags=["check"] exercise_id="11.warp-rank"
print(ps.check.compaction(lambda x, mask: apps.selection.compact_with(x, mask, block_size=64, rank=my_warp_rank),  # two warps a block
                          name="my_warp_rank"))

# %% [markdown]
# ## Summary
#
# | application | operator | element | associative because |
# | --- | --- | --- | --- |
# | linear recurrence, IIR filter | compose affine maps | $(a, b)$, or $(M, v)$ in 2-D | composition of functions |
# | segmented scan | $(f \lor g, v \text{ if } g \text{ else } u + v)$ | (flag, value) | case analysis on the last flag |
# | compaction (section 8: in one pass) | add, carried by the look-back | 0/1 flag; a warp's ballot | integer addition |
# | radix sort pass | add (twice: zeros, then ones) | 0/1 flag | integer addition; stability makes LSD work |
# | onesweep digit pass (section 8) | add, per digit, carried by the look-back | 256 digit counts of a tile | integer addition |
# | running argmax | NaN first, then the larger value, the smaller index on ties | (value, index) | it picks the first in one order of the elements |
# | tridiagonal solve, Stone's method | compose Möbius maps, then affine maps | $2 \times 2$ matrix and a start flag; then $(a, b)$ | matrix product; a positive scale commutes with it |
# | tridiagonal solve by shooting (fails) | compose 2-D affine maps | $3 \times 3$ matrix | matrix product (but the products grow with the recurrence's growing solution) |
# | spline antiderivative | add | piece integral | floating-point addition (up to rounding) |
#
# **Questions.**
# 1. Write the operator for the running **mean** of a sequence. (Hint: carry the count.) Check it
#    with `ps.check.operator`.
# 2. The affine scan's field `A` is the running product of the $a_i$. For the recurrence
#    $x_i = 0.5 x_{i-1} + b_i$ in float32, at what $i$ does `A` underflow to zero, and does that
#    harm `B`?
# 3. A radix sort by 4 bits per pass needs, per pass, the place of each key among the 16 digit
#    values. Express it with 16 exclusive scans of flags; then with one scan of a 16-field tuple.
#    Which moves less memory?
# 4. Why does the shooting scan of section 6 *not* lose accuracy when $|b_i| < |c_i|$ for every
#    row? Construct such a system and try it. Does Stone's method care?
# 5. The segmented scan restarts at flags. Write the operator for a **segmented exclusive** scan
#    (each segment starts at the identity) and say where the flag has to move.
# 6. A spline's antiderivative is continuous because of the scan's constants. What would the
#    antiderivative look like if those constants were dropped, and what is its jump at knot $i$?
