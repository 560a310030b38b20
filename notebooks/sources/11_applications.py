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
# A scan is worth learning because **any associative operator** can ride on it (Blelloch 1990,
# *Prefix sums and their applications*). The earlier chapters used four: add, mul, max, min.
# This one hands the operator to you, and then builds with it: a linear recurrence is a scan of
# affine maps; stream compaction and radix sort are scans of flags (Sengupta et al. 2007); a
# tridiagonal solve is a scan of 3 × 3 matrices, as unstable as chapter 07 warned; a cubic
# spline needs a tridiagonal solve for its second derivatives and a scan for its
# antiderivative. Seed 000 is one chapter of a book whose next chapters were *"Manipulation of
# piecewise polynomial functions in parallel"* and *"... of localized piecewise polynomial
# functions"*; only their titles survive. Section 7 is a small piece of what they promised.
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
# needs one shared array per field, so each algorithm that can carry a user operator holds its
# tile kernel as a *template*, which the package expands for the number of fields: `«x@[p]»`
# stands for `x0[p], x1[p], ...` and a line starting with `each:` is repeated per field. Here is
# the ladder's (chapter 01) template, and below it the kernel generated for pairs:

# %%
print(ladder.TUPLE_TILE)

# %%
operator = user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64")] * 2, False)
kernel, tile, threads = ps.ALGORITHMS["ladder"].user_op(operator, True, False, 32)
print(inspect.getsource(getattr(kernel, "py_func", getattr(kernel, "fn", kernel))))

# %% [markdown]
# The registry says which algorithms carry a user operator (`Algorithm.user_op`); `"auto"`
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
# the larger value, and on a tie the **earlier** one (`p`, since `p` comes before `q`). Then
# `ps.scan((values, np.arange(n)), running_argmax, identity=...)` gives, at every `i`, the
# maximum of `values[:i+1]` and where it first occurs. Argue to yourself why it is associative
# (what does each grouping return for three elements?), and why `(-inf, -1)`, which every
# element beats, is its identity.

# %% tags=["exercise"] exercise_id="11.argmax-operator" points=1 todo="return the element of the larger value, the earlier one on a tie, so that the scan gives every prefix's maximum and the index where it first occurs"
ARGMAX_IDENTITY = (-np.inf, -1)


@cuda.jit(device=True)
def running_argmax(p, q):
    ### BEGIN SOLUTION
    return q if q[0] > p[0] else p
    ### END SOLUTION

# %% tags=["check"] exercise_id="11.argmax-operator"
as_operator = ps.check.operator(running_argmax, ARGMAX_IDENTITY, (np.float64, np.int64), name="running_argmax")
print(as_operator)
in_a_scan = ps.check.scan(lambda x: ps.scan(x, running_argmax, identity=ARGMAX_IDENTITY), op=running_argmax,
                          identity=ARGMAX_IDENTITY, dtype=(np.float64, np.int64), sizes=(1, 2, 33, 300),
                          name="running_argmax")
print(in_a_scan)


def first_indices_of_maxima(values):
    return ps.scan((values, np.arange(values.size)), running_argmax, identity=ARGMAX_IDENTITY)[1]


tie_cases = [(np.round(np.random.default_rng(n).normal(size=n), 1),) for n in (2, 33, 64, 300)]  # rounded: ties occur
print(ps.check.function(first_indices_of_maxima, lambda v: np.array([np.argmax(v[:i + 1]) for i in range(v.size)]),
                        tie_cases, name="running_argmax, first index of a tied maximum"))

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

# %%
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

# %%
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
# elements write nothing (their places belong to the next kept element). The checker runs it on
# many sizes, with poisoned memory, and traces it, and allows a thread of `my_scatter` at most 4
# memory accesses: one thread per element.

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
print(ps.check.compaction(my_compact, name="my_compact", budget=ps.check.Budget(accesses_per_step=4, kernels=("my_scatter",))))

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
# (OR, AND) pairs, one more user operator.

# %%
keys = np.array([5, 2, 7, 4, 1, 6, 3, 0], np.uint32)
fig, axes = plt.subplots(3, 1, figsize=(8, 7))
for bit, ax in enumerate(axes):
    viz.radix_pass(keys, bit, bits=3, ax=ax)
    keys = apps.split_by_bit(cuda.to_device(keys), bit)[0].copy_to_host()
print("after 3 passes:", keys)

# %%
n = ps.size_for_device(simulator=200, gpu=1 << 20)
rng_keys = np.random.default_rng(28)
for dtype in ("int32", "uint64", "float32"):
    kind = np.dtype(dtype).kind
    keys = ((rng_keys.normal(size=n) * 1e3).astype(dtype) if kind == "f"
            else rng_keys.integers(-1000 if kind == "i" else 0, 1000, n).astype(dtype))
    values = np.arange(n)
    sorted_keys, order = apps.radix_sort(keys, values)
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
print(ps.check.radix_pass(my_split, name="my_split", budget=ps.check.Budget(accesses_per_step=8, kernels=("my_split_scatter",))))

# %% [markdown]
# ## 6. A tridiagonal solve as a scan, and what it costs in accuracy
#
# Chapter 07 ended with this reading of a tridiagonal system: if $c_i \ne 0$, row $i$ gives the
# next unknown from the two before,
#
# $$x_{i+1} = \frac{d_i - a_i x_{i-1} - b_i x_i}{c_i},$$
#
# so the state $(x_{i+1}, x_i)$ is a 2-D affine map of $(x_i, x_{i-1})$: a $3 \times 3$ matrix in
# homogeneous coordinates. A scan of those maps (`affine2` again) writes every $x_i$ as
# $\alpha_i x_0 + \beta_i$, and the last row, which has no $x_n$, fixes $x_0$. Work $O(n)$, depth
# $O(\log n)$: Stone's recursive doubling (1973; Demmel's CS267 notes derive it). But the scan is an *initial-value* problem:
# for a diagonally dominant matrix $|b_i / c_i| > 1$, $\alpha_i$ grows like $\prod |b_i/c_i|$, and
# $x_0$ comes from a difference of such numbers. The error grows geometrically with $n$;
# `tridiag.solve` (chapter 08's hybrid, its default), which eliminates instead of
# extrapolating, does not lose anything:

# %%
def tridiagonal_errors(n, rng):
    a, c = rng.uniform(0.5, 1.0, (2, n))
    b, d = 3 + rng.random(n), rng.normal(size=n)
    exact = scipy.linalg.solve_banded((1, 1), np.vstack([np.r_[0, c[:-1]], b, np.r_[a[1:], 0]]), d)
    relative = lambda x: np.abs(x - exact).max() / np.abs(exact).max()  # noqa: E731
    return relative(apps.tridiagonal_scan(a, b, c, d)), relative(ps.tridiag.solve(a, b, c, d))


sizes = [4, 8, 16, 24, 32, 48, 64]
errors = np.array([tridiagonal_errors(n, np.random.default_rng(n)) for n in sizes])
ax = viz.curves(sizes, {"scan of 3x3 matrices": errors[:, 0], "tridiag.solve (hybrid)": np.maximum(errors[:, 1], 1e-17)}, logy=True,
                xlabel="n", ylabel="relative error vs scipy", title="the same system, two parallel solvers")
print("the scan's error grows by more than 1e6 from n = 8 to n = 48:", errors[5, 0] > 1e6 * errors[1, 0])
print("tridiag.solve (the hybrid) stays within 1e-14 of scipy at every n:", bool(np.all(errors[:, 1] < 1e-14)))

# %% [markdown]
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

# %%
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
# ## 8. On the GPU
#
# `benchmarks/applications.py` ran the applications on one GPU against libraries, with inputs
# already on the device, and checked every result before timing it (`benchmarks/applications.csv`).
# Every figure is a whole call on the host clock, synchronised: what a user waits for, Python
# and allocations included; the median of 7 calls (a call over a second was timed once):

# %%
bench = results.read("applications.csv")
print(f"{bench[0]['device']}, {bench[0]['date']}; every result correct: {all(row['correct'] for row in bench)}")
for row in bench:
    if row["task"] not in ("compact", "nonzero"):  # section 9 tabulates those
        print(f"  {row['task']:<8} {row['method']:<40} {row['dtype']:<8} n = {row['n']:>9,}  "
              f"{row['median_us'] / 1000:>9.2f} ms")


# %%
def ms(task, method, dtype, n=None):
    where = {} if n is None else {"n": n}
    return results.value("applications.csv", "median_us", task=task, method=method, dtype=dtype, **where) / 1000


readable_ratio = (ms("compact", "prefixsum apps.compact_by_scan (readable)", "float32", 2**24)
                  / ms("compact", "torch x[mask]", "float32", 2**24))
sort_ratio = (ms("sort", "prefixsum apps.radix_sort (1 bit/pass)", "uint32") / ms("sort", "cupy.sort", "uint32"))
evaluation_ratio = (ms("spline", "scipy evaluate (points, CPU)", "float64")
                    / ms("spline", "prefixsum evaluate (points)", "float64"))
build_ratio = ms("spline", "scipy CubicSpline (build, CPU)", "float64") / ms("spline", "prefixsum cubic_spline (build)",
                                                                             "float64")
cupy_build_s = ms("spline", "cupyx CubicSpline (build)", "float64") / 1000
print(f"readable compaction (three launches), 2^24 float32: {readable_ratio:.1f}x the time of torch's x[mask]")
print(f"radix sort, uint32: {sort_ratio:.0f}x the time of cupy.sort")
print(f"spline build: scipy on the CPU takes {build_ratio:.1f}x ours; evaluation: {evaluation_ratio:.0f}x ours")
print(f"cupyx's CubicSpline build: {cupy_build_s:.0f} s")

# %% [markdown]
# Read the figures with the chapters behind them:
#
# - **Compaction**, the readable version of section 4 (`apps.compact_by_scan`), is correct and
#   simple, and several times slower than the libraries' `x[mask]`: it makes three launches from
#   Python (flags, scan, scatter), allocates twice, and reads the output's length back to the host
#   before it can allocate the output. A library pays for that read too, but fuses the flagging,
#   the scan and the scatter. Section 9 does the same, and overtakes them.
# - **Radix sort** by one bit per pass is the textbook algorithm, and about two orders of
#   magnitude slower than the library sorts behind `cupy.sort` and `torch.sort`. The gap is the
#   lesson: a production radix sort (CUB's, Merrill and Grimshaw 2011) takes several bits per pass
#   (so a handful of passes for 32-bit keys, not 32), counts each tile's digits in shared memory and
#   scans those counts, so each pass moves the keys once. Each of our passes is a scan of n flags
#   plus two launches from Python.
# - **Splines**: building costs a PCR solve plus numpy arithmetic on the host; evaluating millions
#   of points is one kernel (a binary search and Horner's rule per point), hundreds of times faster
#   than scipy on one CPU core. CuPy's own GPU spline, `cupyx.scipy.interpolate.CubicSpline`,
#   evaluates fast but takes over a minute to build the spline of $2^{20}$ knots: an earlier run
#   stopped it at 80 seconds inside `BSpline.design_matrix`, at Python's built-in `min` over a
#   CuPy array, which brings the elements to the host one comparison at a time.
#
# ## 9. At library speed: compaction in one pass
#
# CUB's `DeviceSelect` (behind torch's `x[mask]`) does not scan n flags and then scatter. It
# makes the compaction a *single-pass* scan, the decoupled look-back of chapter 10, with a count
# where chapter 10 had a running sum: a count of kept elements *is* a sum, of 0/1 flags.
# `apps.compact` does the same in one kernel (`prefixsum/apps/selection.py`), tile by tile:
#
# 1. A block draws its tile's id from the look-back's counter (in the order blocks start, as in
#    chapter 10) and loads the tile's flags *striped*: in step k, thread t reads element
#    `k * blockDim + t`, so every load of a warp is one contiguous run. It loads the value of
#    each kept element too, early, so that those loads are in flight during the look-back.
# 2. **The rank inside the tile, without a scan of n flags.** In step k, each warp takes one
#    *ballot* of its 32 flags: a 32-bit word, bit l set if lane l keeps its element. A lane's
#    rank among the warp's kept elements of that step is the number of set bits *below its own
#    lane*; the warp's count is the number of set bits. Warp 0 then scans the (step, warp)
#    counts of the tile, a few dozen numbers, in the tile's order.
# 3. Warp 0 hands the tile's count to chapter 10's look-back, `tile_state.look_back("add", int32)`
#    (the same function, not a copy), which publishes it and returns the number of kept elements
#    in all tiles before. The last tile writes the total for the host.
# 4. Each kept element goes to `out[before the tile + before its warp's step + its rank]`. The
#    kept elements of one warp's step are neighbours in the output, so the stores are contiguous.
#
# Stable by construction (places follow the elements' order); one launch; n flags read, a value
# only where it is kept, each kept value written once. The output's length is known only when the
# last tile has finished: `compact` writes it to host memory the GPU can write directly
# (`cuda.mapped_array`) and waits for the kernel, as `x[mask]` waits in numpy, torch and CuPy.
# `compact(x, mask, sync=False)` waits for nothing and returns a buffer of n with a device array
# holding the count, as CUB's `DeviceSelect::Flagged` does; `compact_indices(mask)` is numpy's
# `flatnonzero` by the same kernel, writing indices instead of values.

# %%
print(inspect.getsource(apps.selection.select_kernel))

# %% [markdown]
# **Which tile waited for which count.** On the concurrent simulator, 8 blocks resident at once,
# started in a shuffled order, with tiles of one warp (`compact_with`: 32 elements a tile), the
# trace records every read of a tile's state. A tile that read a predecessor's state more than
# once found nothing published there yet, and waited for that tile's count:

# %%
rng_select = np.random.default_rng(30)
values = np.arange(32 * 40, dtype=np.float32)
keep = rng_select.random(values.size) < 0.5
with ps.sim.block_order_seed(2), ps.sim.resident_blocks(8):
    run = ps.trace.record(apps.selection.compact_with, values, keep)
print("compact_with is x[mask]:", np.array_equal(run.result, values[keep]))
states_read = {}
for record in run.select(array="status"):
    if record.atomic:
        states_read.setdefault(record.block, []).append(record.index)
for indices in sorted(states_read.values(), key=max):
    tile = max(indices)  # a block publishes its own tile's state last
    waited = sorted(p for p, reads in collections.Counter(i for i in indices if i < tile).items() if reads > 1)
    if waited:
        print(f"tile {tile:>2} waited for the count of tile{'s' if len(waited) > 1 else ''} "
              f"{', '.join(map(str, waited))}")
ax = viz.lookbacks(run)

# %% [markdown]
# The measured table: whole calls (a user's wait: allocation, the launch, the count, Python) and
# the device time of the same calls by CUPTI (`torch.profiler`: every kernel and copy summed;
# torch's `x[mask]` runs five kernels and a copy of the count to the host, CuPy's six), half the
# flags set, inputs already on the device:

# %%
print(f"{bench[0]['device']}, {bench[0]['date']}; microseconds, whole call (device time)")
print(f"{'n':>10} {'dtype':>8} {'apps.compact':>16} {'torch x[mask]':>16} {'cupy x[mask]':>16} {'vs torch':>9} "
      f"{'vs CuPy':>8}")
for n in sorted({row["n"] for row in results.read("applications.csv", task="compact")}):
    for dtype in ("float32", "int32", "float64"):
        cells = [results.read("applications.csv", task="compact", method=method, dtype=dtype, n=n)[0]
                 for method in ("prefixsum apps.compact", "torch x[mask]", "cupy x[mask]")]
        times = [f"{row['median_us']:>7.1f} ({row['device_us']:>5.1f})" for row in cells]
        print(f"{n:>10,} {dtype:>8} {times[0]:>16} {times[1]:>16} {times[2]:>16} "
              f"{cells[1]['median_us'] / cells[0]['median_us']:>8.1f}x {cells[2]['median_us'] / cells[0]['median_us']:>7.1f}x")

# %% [markdown]
# The kernel moves the flags, the input and the kept values once: at $2^{26}$ float32, 448 MB in
# 235 microseconds, 1.9 TB/s of the H100's 3.35. The whole call adds some 30 microseconds of
# Python, allocation and the wait, which is why the ratio is smaller at $2^{20}$. torch's `x[mask]` counts the flags (a reduction), copies the count
# to the host, allocates, then selects and gathers in further kernels: more passes over the data.
#
# ### Exercise 11.warp-rank (stretch, 2 points): the rank inside a warp
#
# Write the device function `my_warp_rank(kept)` that step 2 calls: every lane of a warp calls it
# with its own flag (a bool), and it returns two numbers, how many lanes *below* the caller have
# their flag set (the caller's rank), and how many lanes of the warp have it set. No shared
# memory and no loop: a vote, a mask and a bit count. The check runs the compaction of this
# section with your function in place of the package's, on many sizes.
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
print(ps.check.compaction(lambda x, mask: apps.selection.compact_with(x, mask, rank=my_warp_rank), name="my_warp_rank"))

# %% [markdown]
# ## Summary
#
# | application | operator | element | associative because |
# | --- | --- | --- | --- |
# | linear recurrence, IIR filter | compose affine maps | $(a, b)$, or $(M, v)$ in 2-D | composition of functions |
# | segmented scan | $(f \lor g, v \text{ if } g \text{ else } u + v)$ | (flag, value) | case analysis on the last flag |
# | compaction (section 9: in one pass) | add, carried by the look-back | 0/1 flag; a warp's ballot | integer addition |
# | radix sort pass | add (twice: zeros, then ones) | 0/1 flag | integer addition; stability makes LSD work |
# | running argmax | larger value, earlier on ties | (value, index) | "the first maximum of three" is one element |
# | tridiagonal solve | compose 2-D affine maps | $3 \times 3$ matrix | matrix product (unstable: the products grow) |
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
# 4. Why does the tridiagonal scan of section 6 *not* lose accuracy when $|b_i| < |c_i|$ for every
#    row? Construct such a system and try it.
# 5. The segmented scan restarts at flags. Write the operator for a **segmented exclusive** scan
#    (each segment starts at the identity) and say where the flag has to move.
# 6. A spline's antiderivative is continuous because of the scan's constants. What would the
#    antiderivative look like if those constants were dropped, and what is its jump at knot $i$?
