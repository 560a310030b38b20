"""Which checked notebook cells print something that depends on the device.

nbval compares what each code cell prints with what ``notebooks/build.py`` stored on the
simulator, so on a GPU every cell that nbval checks must print the same text: no size from
``ps.size_for_device``, no timing, no device name, no random draw from a generator whose
earlier draws had a device-dependent size. Running the notebooks on both devices would show
it; ``tests/test_notebook_outputs.py`` reads the jupytext sources instead (no GPU, no kernels)
and runs this small taint analysis over each notebook's code cells in order, as the kernel
runs them:

* a **source** is a call or attribute of :data:`SOURCES` (resolved through the imports, so
  ``ps.size_for_device`` is ``prefixsum.size_for_device``);
* a name assigned from an expression that uses a tainted name or a source is tainted, through
  tuple unpacking, ``for`` targets, comprehensions, ``with ... as``, augmented and subscript
  assignments, and the assignments under an ``if``/``while`` whose test is tainted;
* a method call with a tainted argument taints its receiver: ``rng.normal(size=n)`` leaves
  ``rng`` in a device-dependent state, so its later draws are tainted too;
* a call of a notebook function is tainted if its arguments are, or the globals it reads are
  when it is called; a call of one that prints, with such inputs, counts as a print;
* a **verdict** (a comparison, ``np.array_equal``, ``np.allclose``, ``all``, ``any``, ...) is
  not tainted: it prints ``True`` wherever the code is right, which is how a check on a
  device-sized input reports. In a condition (``if``, a comprehension's filter), where it
  decides what runs, a comparison keeps the taint of its operands.

A checked cell (no ``NBVAL_IGNORE_OUTPUT``/``NBVAL_SKIP`` comment, no ``nbval-ignore-output``/
``nbval-skip`` tag) is reported when it passes a tainted expression to ``print`` or ``display``, or
when its last statement is a tainted expression (Jupyter shows its value). It is a lint, not a
proof: it does not follow the package's own functions, attributes of objects, or loops whose
number of turns depends on the device.
"""

import ast
import re

import jupytext

# Qualified names (and everything under them) whose values differ from device to device.
SOURCES = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.process_time",
    "timeit",
    "datetime.datetime.now",
    "datetime.datetime.today",
    "datetime.date.today",
    "numba.cuda.get_current_device",
    "numba.cuda.current_context",
    "numba.cuda.gpus",
    "numba.cuda.detect",
    "numba.cuda.is_available",
    "numba.cuda.list_devices",
    "numba.cuda.event",
    "numba.cuda.event_elapsed_time",
    "torch.cuda",
    "cupy.cuda",
    "prefixsum.cli.bench",
    "prefixsum.cli.timing",
    "platform",
    "os.cpu_count",
    "socket.gethostname",
)
# The package's device queries, wherever it exports them from.
PACKAGE_SOURCES = {"size_for_device", "device_info", "simulating", "classroom_simulator"}
VERDICTS = {
    "numpy.array_equal",
    "numpy.array_equiv",
    "numpy.allclose",
    "math.isclose",
    "builtins.all",
    "builtins.any",
    "builtins.isinstance",
}
OUTPUTS = {
    "builtins.print",
    "builtins.display",
    "IPython.display.display",
    "pprint.pprint",
    "sys.stdout.write",
    "sys.stderr.write",
}
IGNORED = {"NBVAL_IGNORE_OUTPUT", "PYTEST_VALIDATE_IGNORE_OUTPUT", "NBVAL_SKIP"}
IGNORED_TAGS = {"nbval-ignore-output", "pytest-validate-ignore-output", "nbval-skip"}
CELL_MARKER = re.compile(r"^# %%( |$)", re.MULTILINE)


def checked(cell):
    """Whether nbval compares this cell's output (its comment markers win over its tags, as in nbval)."""
    comments = {line.strip().lstrip("#").strip() for line in cell.source.splitlines() if line.strip().startswith("#")}
    if "NBVAL_CHECK_OUTPUT" in comments:
        return True
    return not (comments & IGNORED or set(cell.metadata.get("tags", ())) & IGNORED_TAGS)


def python_source(source):
    """The cell's code with IPython's magics and shell escapes blanked (line numbers kept)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


class Function:
    """What a call of a function defined in the notebook may depend on."""

    def __init__(self, node, analysis):
        arguments = node.args
        params = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
        params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a}
        body = [n for statement in node.body for n in ast.walk(statement)]
        stored = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.reads = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - params - stored
        self.source = next((analysis.source(n) for n in body if analysis.source(n)), None)
        self.prints = any(
            isinstance(n, ast.Call) and (analysis.qualname(n.func) in OUTPUTS or analysis.prints(n.func)) for n in body
        )


class Analysis:
    """The taint analysis of one notebook's code cells, run in order (see the module's docstring).

    Parameters
    ----------
    name : str
        The notebook's name, for the messages.
    """

    def __init__(self, name):
        self.name = name
        self.aliases = {}  # imported name -> qualified name
        self.bound = set()  # names the notebook binds (not builtins)
        self.functions = {}  # name -> Function
        self.problems = {}  # (cell, line, text) -> message, in the order found
        self.seen = set()  # the sources met (qualified names)
        self.cell, self.first_line, self.report = None, 0, False

    # -- names ---------------------------------------------------------------------------------
    def qualname(self, node):
        """``numpy.array_equal`` for ``np.array_equal`` after ``import numpy as np``; None if not a module's."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return None if node.id in self.bound else f"builtins.{node.id}"
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return base and f"{base}.{node.attr}"
        return None

    def source(self, node):
        """A description of the device-dependent source that ``node`` names, or None."""
        name = self.qualname(node)
        if name is None or name.startswith("builtins."):
            return None
        if any(name == s or name.startswith(s + ".") for s in SOURCES) or (
            name.startswith("prefixsum.") and name.rsplit(".", 1)[1] in PACKAGE_SOURCES
        ):
            self.seen.add(name)
            return f"{ast.unparse(node)} at line {self.first_line + node.lineno - 1}"
        return None

    def prints(self, func):
        """Whether ``func`` names a notebook function that prints."""
        return isinstance(func, ast.Name) and func.id in self.functions and self.functions[func.id].prints

    def bind(self, target, origin, env, scoped=False):
        """Assign something of taint ``origin`` to ``target``; ``scoped``: in a comprehension's own scope."""
        if isinstance(target, ast.Name):
            if not scoped:
                self.bound.add(target.id)
                self.aliases.pop(target.id, None)
                self.functions.pop(target.id, None)
            if origin:
                env[target.id] = origin
            else:
                env.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, origin, env, scoped)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, origin, env, scoped)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            root = target
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                origin = origin or (self.taint(root.slice, env) if isinstance(root, ast.Subscript) else None)
                root = root.value
            if isinstance(root, ast.Name) and origin:  # a clean store into a tainted container leaves it tainted
                env[root.id] = origin

    def assign(self, target, value, env, control):
        """``target = value``, element by element where both are tuples of one length."""
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts)
        ):
            for t, v in zip(target.elts, value.elts):
                self.assign(t, v, env, control)
        else:
            self.bind(target, self.taint(value, env) or control, env)

    # -- expressions -----------------------------------------------------------------------------
    def taint(self, node, env, verdicts=True):
        """Where ``node``'s value gets a device dependence from, or None."""
        if node is None or isinstance(node, ast.expr_context):
            return None
        if isinstance(node, ast.Name):
            return env.get(node.id) or self.source(node)
        if isinstance(node, ast.Attribute):
            return self.source(node) or self.taint(node.value, env, verdicts)
        if isinstance(node, ast.Compare) and verdicts:
            return None
        if isinstance(node, ast.Call):
            if verdicts and self.qualname(node.func) in VERDICTS:
                return None
            return self.call(node, env)
        if isinstance(node, ast.Lambda):
            params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            return self.taint(node.body, {k: v for k, v in env.items() if k not in params})
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node, env)
        if isinstance(node, ast.IfExp):
            return (
                self.taint(node.test, env, verdicts=False)
                or self.taint(node.body, env, verdicts)
                or self.taint(node.orelse, env, verdicts)
            )
        if isinstance(node, ast.NamedExpr):
            origin = self.taint(node.value, env, verdicts)
            self.bind(node.target, origin, env)
            return origin
        return next(filter(None, (self.taint(child, env, verdicts) for child in ast.iter_child_nodes(node))), None)

    def call(self, node, env):
        """The taint of a call: of the callee and the arguments, and of what a notebook function reads."""
        inputs = [node.func] + node.args + [k.value for k in node.keywords]
        origin = next(filter(None, (self.taint(n, env) for n in inputs)), None)
        function = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if function and not origin:
            origin = function.source or next((env[name] for name in sorted(function.reads) if name in env), None)
        return origin

    def comprehension(self, node, env):
        """The taint of a comprehension's elements, its targets bound in a scope of its own."""
        scope = dict(env)
        for generator in node.generators:
            self.bind(generator.target, self.taint(generator.iter, scope), scope, scoped=True)
            for condition in generator.ifs:
                filtered = self.taint(condition, scope, verdicts=False)
                if filtered:
                    return filtered
        parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        return next(filter(None, (self.taint(part, scope) for part in parts)), None)

    # -- statements -----------------------------------------------------------------------------
    def expressions(self, statement):
        """The expression nodes that run as part of ``statement`` itself (not its body, not lambdas)."""
        stack = [child for child in ast.iter_child_nodes(statement) if isinstance(child, (ast.expr, ast.keyword))]
        while stack:
            node = stack.pop()
            yield node
            if not isinstance(node, ast.Lambda):
                stack.extend(ast.iter_child_nodes(node))

    def side_effects(self, statement, env):
        """Report prints of tainted values; taint the receivers of method calls given tainted arguments."""
        for node in self.expressions(statement):
            if not isinstance(node, ast.Call):
                continue
            arguments = node.args + [k.value for k in node.keywords]
            if self.qualname(node.func) in OUTPUTS or self.prints(node.func):
                shown = next(filter(None, (self.taint(a, env) for a in arguments)), None)
                if not shown and self.prints(node.func):
                    shown = self.call(node, env)
                if shown:
                    self.problem(node, f"{ast.unparse(node)[:80]} prints a value that depends on {shown}")
            elif isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                while isinstance(receiver, (ast.Attribute, ast.Subscript)):
                    receiver = receiver.value
                origin = next(filter(None, (self.taint(a, env) for a in arguments)), None)
                if origin and isinstance(receiver, ast.Name) and receiver.id not in self.aliases:
                    env[receiver.id] = origin

    def problem(self, node, text):
        """Record ``text`` about ``node`` of the current cell, if the cell is checked."""
        if self.report:
            line = self.first_line + node.lineno - 1
            self.problems.setdefault(
                (self.cell, line, text), f"{self.name}, cell {self.cell} (cell-{self.cell:03d}), line {line}: {text}"
            )

    def run(self, statements, env, control=None):
        for statement in statements:
            self.statement(statement, env, control)
        return env

    def branches(self, env, control, *bodies):
        """Run each body from ``env``; afterwards a name is tainted if it is after any of them."""
        self.merge(env, [self.run(body, dict(env), control) for body in bodies])

    @staticmethod
    def merge(env, results):
        env.clear()
        for result in results:
            env.update(result)

    def statement(self, node, env, control):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.side_effects(node, env)
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                self.aliases[name] = alias.name if alias.asname else name
                self.bound.add(name)
                env.pop(name, None)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                self.aliases[name] = f"{node.module}.{alias.name}"
                self.bound.add(name)
                env.pop(name, None)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self.assign(target, node.value, env, control)
            if (
                isinstance(node.value, ast.Call)
                and self.qualname(node.value.func) == "importlib.import_module"
                and isinstance(node.value.args[0], ast.Constant)
                and isinstance(node.targets[0], ast.Name)
            ):
                self.aliases[node.targets[0].id] = node.value.args[0].value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            extra = self.taint(node.target, env) if isinstance(node, ast.AugAssign) else None
            self.bind(node.target, self.taint(node.value, env) or extra or control, env)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.loop(node, env, control)
        elif isinstance(node, ast.While):
            self.branches(env, self.taint(node.test, env, verdicts=False) or control, node.body + node.body, [])
            self.run(node.orelse, env, control)
        elif isinstance(node, ast.If):
            self.branches(env, self.taint(node.test, env, verdicts=False) or control, node.body, node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, self.taint(item.context_expr, env) or control, env)
            self.run(node.body, env, control)
        elif isinstance(node, ast.Try):
            results = [self.run(node.body + node.orelse, dict(env), control)]
            for handler in node.handlers:
                if handler.name:  # it holds the exception, not the value from before
                    self.bound.add(handler.name)
                results.append(self.run(handler.body, {k: v for k, v in env.items() if k != handler.name}, control))
            self.merge(env, results)
            self.run(node.finalbody, env, control)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.bind(ast.Name(node.name, ast.Store()), None, env)
            self.functions[node.name] = Function(node, self)
        elif isinstance(node, ast.ClassDef):
            self.bind(ast.Name(node.name, ast.Store()), None, env)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env.pop(target.id, None)

    def columns(self, target, iterable):
        """For ``for a, b in zip(x, y)`` or ``in ((x1, y1), (x2, y2))``: what each of a, b comes from; else None."""
        if not isinstance(target, ast.Tuple) or any(isinstance(e, ast.Starred) for e in target.elts):
            return None
        width = len(target.elts)
        if isinstance(iterable, ast.Call) and self.qualname(iterable.func) == "builtins.zip":
            return [[a] for a in iterable.args] if len(iterable.args) == width and not iterable.keywords else None
        rows = iterable.elts if isinstance(iterable, (ast.Tuple, ast.List)) else ()
        if rows and all(isinstance(r, (ast.Tuple, ast.List)) and len(r.elts) == width for r in rows):
            return [[r.elts[k] for r in rows] for k in range(width)]
        return None

    def loop(self, node, env, control):
        """A ``for`` loop, run twice so that what one turn taints reaches the next."""
        columns = self.columns(node.target, node.iter)
        for _ in range(2):
            if columns:
                for target, column in zip(node.target.elts, columns):
                    self.bind(target, next(filter(None, (self.taint(e, env) for e in column)), control), env)
            else:
                self.bind(node.target, self.taint(node.iter, env) or control, env)
            self.branches(env, control, node.body, [])
        self.run(node.orelse, env, control)

    def cell_code(self, number, source, first_line, report, env):
        """Run one code cell; with ``report``, report its tainted prints and a tainted last expression."""
        self.cell, self.first_line, self.report = number, first_line, report
        tree = ast.parse(python_source(source))
        self.run(tree.body, env)
        last = tree.body[-1] if tree.body else None
        if (
            report
            and isinstance(last, ast.Expr)
            and not source.rstrip().endswith(";")
            and not (isinstance(last.value, ast.Call) and self.qualname(last.value.func) in OUTPUTS)
        ):
            shown = self.taint(last.value, env)
            if shown:
                self.problem(last, f"the cell shows {ast.unparse(last.value)[:80]}, which depends on {shown}")


def analyse(text, name):
    """Run the analysis over every code cell of a notebook, in order.

    Parameters
    ----------
    text : str
        The notebook as a jupytext percent-format source.
    name : str
        Its name, for the messages.

    Returns
    -------
    Analysis
        The analysis after the last cell: ``problems`` holds the messages, ``seen`` the sources met.
    """
    notebook = jupytext.reads(text, fmt="py:percent")
    starts = [m.start() for m in CELL_MARKER.finditer(text)]
    assert len(starts) == len(notebook.cells), f"{name}: {len(starts)} '# %%' markers, {len(notebook.cells)} cells"
    analysis, env = Analysis(name), {}
    for number, (cell, start) in enumerate(zip(notebook.cells, starts)):
        if cell.cell_type == "code":
            body = text.index("\n", start) + 1  # the line after the marker
            offset = text.find(cell.source, body) if cell.source else -1
            analysis.cell_code(
                number, cell.source, text.count("\n", 0, offset if offset >= 0 else body) + 1, checked(cell), env
            )
    return analysis


def problems(text, name="notebook.py"):
    """The checked cells of a notebook that print device-dependent values.

    ``text`` and ``name`` are :func:`analyse`'s.

    Returns
    -------
    list of str
        One message per offending print or last expression: notebook, cell number (and the
        ``cell-NNN`` id that ``notebooks/build.py`` gives it), line in ``text``, the expression and
        the source it depends on.
    """
    return list(analyse(text, name).problems.values())
