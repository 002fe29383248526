"""Reading Inductor's generated wrapper code: the kernels one inference calls, in order.

Inductor emits a Python module whose `call(args)` function launches every kernel of the graph:
generated kernels (`cpp_fused_add_relu_3(...)` on CPU, `triton_poi_fused_add_relu_3.run(...)` on
GPU) and library calls (`extern_kernels.convolution(...)`, `torch.ops.mkldnn._convolution_pointwise
.default(..., 'relu', ...)`). With static shapes each statement runs once per inference, so the
calls found here are the inference's kernels. Generated kernels are named after the ATen
operators fused into them (Inductor's `descriptive_names = "original_aten"`, at most
`kernel_name_max_ops` operators); library calls carry their fused post-ops as string arguments.

A name lists every origin of a kernel's nodes, including tensors the kernel only reads or
copies, so each generated kernel's source, which the wrapper module holds too, is read
(`inductor_kernel_body`):
- a kernel that computes nothing is a copy: it runs the copying operators its name lists
  (`clone`, `cat`, ...), or is Inductor's own layout copy (`inductor.layout_copy`) when the name
  lists none;
- outside a template, a convolution, matrix multiply or attention named in a kernel runs in a
  library call before or after it; the kernel only adds its bias or moves its operands or result
  between layouts, reported as `aten.convolution (bias or layout)`, which is not a tensor operator.

Known limits: operators folded away at compile time (batch norm into conv weights under
`freezing`) leave no trace in the code; a kernel whose source is not in the wrapper is read from
its name alone (one named without operators, `cpp_fused_4`, then has none); a matrix multiply
that Inductor decomposes into generated code (an outer product, K = 1; on CPU at batch 1, one with
a single output column) is reported as its bias or layout part although the kernel computes it;
a kernel that computes may still be named after an operator whose tensor it only reads. The
source bounds that where it can (`inductor_kernel_body.steps`): a kernel of a single arithmetic
step that adds a tensor operator's bias ran that bias alone (resnet18's and mobilenet_v3_small's
last kernels, named after the mean and the hardswish before the classifier), the bias of an operator
that takes one (a linear's, where the name lists the attention it feeds before it); in a kernel of
several steps every operator its name lists stays (mobilenet_v3_small's bias and hardswish kernel
still lists the mean), except where each step adds a pair of buffers of its own and the name lists
tensor operators alone: it adds that many operators' biases (BERT's query, key and value linears').
A `nested_compile_region` is a function of the module too (`repeated_subgraph0`), which `call` calls
at each call of the region in the model: its kernels are listed there, at each call, as every call runs
them (`placed_kernel_calls`); the record of a graph's passes (its attention calls, its folded batch
norms) is read onto the graph's own kernels, so a region's attention call is one operator, its folded
batch norm unseen. A `torch.cond` branch's kernels are in a function `call` calls too (`true_graph_0`);
they are not listed, as an inference runs one branch, and `subgraph_kernels` counts them for the note,
as it does a while_loop's condition and body, which run as many times as the loop turns.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from backends.inductor_kernel_body import computes, is_template, steps
from harness.fusion import PART_OF_TENSOR_OP, KernelGroup, is_part_of_tensor_op, is_tensor_op, is_view_op, op_name

LAYOUT_COPY = "inductor.layout_copy"
#: How a kind names a tensor operator's part a generated kernel runs (`generated_kinds`).
PART_KIND = "bias"

_GENERATED_PREFIX = re.compile(r"^(cpp|triton_(poi|red|per|tem|for|mix|spl|sca)|triton)_fused_?")
# Operators that move data without arithmetic: what a kernel that computes nothing may still run.
_COPYING = {
    "clone", "copy", "copy_", "_to_copy", "contiguous", "cat", "concat", "stack", "constant_pad_nd", "pad",
    "slice_scatter", "select_scatter", "index", "index_select", "gather", "embedding", "repeat", "roll", "flip",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "fill", "full", "full_like",
    "zeros", "zeros_like", "new_zeros", "ones_like", "lift_fresh", "where", "masked_fill", "arange", "iota",
}
# Tensor operators that take a bias, which a generated kernel of one step may add apart from them: not
# an attention, mm or bmm.
_TAKES_BIAS = re.compile(r"^(addmm|addbmm|baddbmm|linear|_linear_pointwise\w*|_?convolution\w*|conv\w*"
                         r"|_convolution_pointwise\w*|\w+_convolution\w*)$")
# A step of `inductor_kernel_body.steps` that adds two values read from memory, and does nothing else.
_ADDITION = re.compile(r"^tmp\w*\s*\+\s*tmp\w* on ")
# Post-op names mkldnn/oneDNN library calls take as string arguments.
_POST_OPS = {
    "relu", "sigmoid", "tanh", "hardswish", "hardsigmoid", "hardtanh", "gelu", "silu", "swish",
    "leaky_relu", "mish", "add", "sub", "mul", "div", "sum",
}
_IGNORED_CALLS = {
    "empty_strided_cpu", "empty_strided_cuda", "empty_strided", "reinterpret_tensor",
    "assert_size_stride", "assert_size_stride_grouped", "assert_tensor_metadata", "assert_alignment",
}


def kernel_calls(source: str, aten_names: Iterable[str]) -> list[KernelGroup]:
    """Kernels called by the `call` function of one generated wrapper module, in order, a
    `nested_compile_region`'s at each call of it (`placed_kernel_calls`)."""
    return [group for group, _ in placed_kernel_calls(source, aten_names)]


def placed_kernel_calls(source: str, aten_names: Iterable[str]) -> list[tuple[KernelGroup, str | None]]:
    """`kernel_calls`, each kernel with the subgraph whose function it runs in (None: the graph's own code).
    A `nested_compile_region` is one function of the module (`repeated_subgraph0`, its kernels defined
    beside the graph's), which `call` calls at each call of the region in the model; a region inside a
    region, or inside a torch.cond branch, is a function its parent calls the same way
    (`repeated_subgraph0_repeated_subgraph0`). Each statement that calls such a function runs it once,
    so its kernels are listed there, in order, as many times as it is called: every call of them runs
    every inference. A function called in an `if`'s branch or a loop (a torch.cond branch, a
    while_loop's condition and body) is not (`subgraph_kernels`)."""
    tree = ast.parse(source)
    return _Module(tree, set(aten_names)).kernels_of(_find_call(tree).body)


def subgraph_kernels(source: str, aten_names: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The functions of one generated wrapper module that its `call` calls by name and `kernel_calls`
    does not list, each with the kernels one call of it runs: a `torch.cond` branch's subgraph
    (`true_graph_0`, called in a branch of an `if` alone), and apart the others, whose calls run in a loop
    (a `while_loop`'s condition and body, at each turn). The report lists one inference's kernels in
    order: an inference runs one branch, which its data chooses (their names also list the condition's
    operators: `cpp_fused_add_gt_mul_relu_2`, whose `gt` the kernel before the branch computed), and a
    loop's turns are as many as its data makes them. A `nested_compile_region`, called outside both,
    is listed at each call (`placed_kernel_calls`), and is neither."""
    tree = ast.parse(source)
    module = _Module(tree, set(aten_names))
    called = module.places(_find_call(tree).body)
    kernels = {name: len(module.kernels_of(module.functions[name].body)) for name in sorted(called)
               if name not in module.listed}
    return ({name: count for name, count in kernels.items() if called[name] == {_IN_BRANCH}},
            {name: count for name, count in kernels.items() if called[name] != {_IN_BRANCH}})


def region_calls(source: str) -> dict[str, int]:
    """Each function of one generated wrapper module that `placed_kernel_calls` lists at its calls (a
    `nested_compile_region`'s), with how many times the graph's `call` runs it, its parents' calls
    counted: the note's account of the kernels listed from subgraphs."""
    tree = ast.parse(source)
    module = _Module(tree, set())
    counts: dict[str, int] = {}

    def count(body: list[ast.stmt], times: int) -> None:
        for call in _calls_in_order(body):
            name = _dotted(call.func)
            if name is not None and name in module.listed:
                counts[name] = counts.get(name, 0) + times
                count(module.functions[name].body, times)

    count(_find_call(tree).body, 1)
    return counts


def branch_note(branches: dict[str, int], others: dict[str, int] | None = None, regions: dict[str, int] | None = None) -> str:
    """The fusion report's note on the `torch.cond` branches and the other subgraphs `subgraph_kernels`
    found, and on the regions' kernels `kernel_calls` lists at each call (`region_calls`); empty where none."""
    said = []
    if regions:
        each = ", ".join(f"{name}: {calls} call(s)" for name, calls in regions.items())
        said.append(f"{len(regions)} nested_compile_region subgraph(s) whose kernels are listed at each call ({each}), "
                    "as every call runs them")
    if branches:
        each = ", ".join(f"{name}: {count} kernel(s)" for name, count in branches.items())
        said.append(f"{len(branches)} torch.cond branch(es) whose kernels are not listed ({each}): an inference runs "
                    "one of them, as its data chooses, so neither stands in the list of the kernels in order")
    if others:
        each = ", ".join(f"{name}: {count} kernel(s)" for name, count in others.items())
        said.append(f"{len(others)} subgraph(s) whose kernels are not listed ({each}): the graph calls them in a loop "
                    "(a while_loop's condition and body at each turn), as many times as its data makes it turn")
    return "; ".join(said)


def placed_back(own: Iterable[KernelGroup], placed: Iterable[list[tuple[KernelGroup, str | None]]]) -> list[KernelGroup]:
    """The kernels of `placed` (`placed_kernel_calls`, per graph), a graph's own ones given in order by
    `own` (as read again, an attention call Inductor made with the operators it replaced, a folded batch
    norm with its convolution), the subgraphs' ones as `placed` has them."""
    mine = iter(own)
    return [next(mine) if subgraph is None else group for graph in placed for group, subgraph in graph]


_IN_BRANCH, _IN_LOOP, _STRAIGHT = "branch", "loop", "straight"


class _Module:
    """One generated wrapper module: its functions, its kernels' sources, which functions run at each
    call of them (`listed`)."""

    def __init__(self, tree: ast.Module, vocabulary: set[str]) -> None:
        self.functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.sources, self.vocabulary = _kernel_sources(tree), vocabulary
        every: dict[str, set[str]] = {}
        for function in [*self.functions.values(), _find_call(tree)]:
            for name, where in self.places(function.body).items():
                every.setdefault(name, set()).update(where)
        self.listed = {name for name, where in every.items() if where == {_STRAIGHT}}

    def places(self, body: list[ast.stmt]) -> dict[str, set[str]]:
        """Each of the module's functions the statements `body` call, with where: in an `if`'s branch,
        in a loop, or straight."""
        found: dict[str, set[str]] = {}

        def visit(node: ast.AST, where: str) -> None:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions:
                found.setdefault(node.func.id, set()).add(where)
            if isinstance(node, ast.If):
                visit(node.test, where)
                for statement in node.body + node.orelse:
                    visit(statement, _IN_LOOP if where == _IN_LOOP else _IN_BRANCH)
                return
            for child in ast.iter_child_nodes(node):
                visit(child, _IN_LOOP if isinstance(node, (ast.While, ast.For)) else where)

        for statement in body:
            visit(statement, _STRAIGHT)
        return found

    def kernels_of(self, body: list[ast.stmt], subgraph: str | None = None) -> list[tuple[KernelGroup, str | None]]:
        """The kernels the statements `body` call, in order, a listed function's at each call of it, each
        with the subgraph it runs in (`subgraph` for `body`'s own)."""
        groups: list[tuple[KernelGroup, str | None]] = []
        for call in _calls_in_order(body):
            name = _dotted(call.func)
            if name is not None and name in self.listed:
                groups.extend(self.kernels_of(self.functions[name].body, name))
                continue
            group = self.kernel(call, name)
            if group is not None:
                groups.append((group, subgraph))
        return groups

    def kernel(self, call: ast.Call, name: str | None) -> KernelGroup | None:
        """The kernel one call runs, None where it runs none (an allocation, a check)."""
        if name is None or name.split(".")[-1] in _IGNORED_CALLS:
            return None
        head = name.split(".")[0]
        if _GENERATED_PREFIX.match(head):
            return KernelGroup(kernel=head, ops=ops_run(head, ops_from_kernel_name(head, self.vocabulary), self.sources.get(head)))
        if name.startswith("extern_kernels."):
            return KernelGroup(kernel=name, ops=(f"aten.{name.split('.')[1]}", *_post_ops(call)))
        if name.startswith("torch.ops."):
            parts = name.split(".")
            return KernelGroup(kernel=".".join(parts[:4]), ops=(".".join(parts[2:4]), *_post_ops(call)))
        return None


def ops_from_kernel_name(kernel: str, vocabulary: set[str]) -> tuple[str, ...]:
    """`cpp_fused__native_batch_norm_legit_no_training_add_relu_3` ->
    (aten._native_batch_norm_legit_no_training, aten.add, aten.relu)."""
    body = _GENERATED_PREFIX.sub("", kernel)
    body = re.sub(r"_\d+$", "", body)
    if not body or body.isdigit():
        return ()
    tokens = body.split("_")
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        match = None
        for j in range(len(tokens), i, -1):
            candidate = "_".join(tokens[i:j])
            if candidate in vocabulary and candidate:
                match = (candidate, j)
                break
        if match is None:
            if tokens[i]:
                ops.append(f"aten.{tokens[i]}")
            i += 1
        else:
            ops.append(f"aten.{match[0]}")
            i = match[1]
    return tuple(ops)


def ops_run(kernel: str, named: tuple[str, ...], body: str | None) -> tuple[str, ...]:
    """The operators a generated kernel runs: those its name lists (`named`), read against its
    source `body` (None where the wrapper does not hold it)."""
    if body is None or is_template(kernel, body):
        return named
    if not computes(body):
        copying = tuple(op for op in named if op_name(op) in _COPYING or is_view_op(op))
        return copying if any(not is_view_op(op) for op in copying) else (LAYOUT_COPY,)
    ran = tuple(op + PART_OF_TENSOR_OP if is_tensor_op(op) else op for op in named)
    parts = [op for op in ran if is_part_of_tensor_op(op)]
    if not parts:
        return ran
    done = steps(body)
    # The operator whose bias a step adds: the name lists its operators alphabetically, so of an attention
    # and the linear before it (`cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_...`) the
    # attention came first, where the kernel adds the linear's and the attention, a library call after it,
    # has none.
    bias = next((op for op in parts if _TAKES_BIAS.match(op_name(op.removesuffix(PART_OF_TENSOR_OP)))), None)
    if len(done) == 1:  # one step: a tensor operator's bias, whatever else the name lists
        return tuple(op for op in ran if op == (bias or parts[0]) or is_view_op(op))
    if bias is not None and all(is_part_of_tensor_op(op) or is_view_op(op) for op in ran) and all(map(_ADDITION.match, done)):
        # Additions alone, each on its own pair of buffers, where the name lists only tensor operators:
        # the biases of as many operators, which the name lists once (BERT's query, key and value
        # linears, `cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_transpose_view_1`), not
        # the attention's, which takes none; vit_b_16's one linear adds its bias in one step.
        return (bias,) * len(done) + tuple(op for op in ran if is_view_op(op))
    return ran


def generated_kinds(groups: Iterable[KernelGroup]) -> dict[str, str]:
    """The kind of each generated kernel whose name lists operators it does not run, named after
    what it runs (harness/measure/kernel_kinds.py):
    - a kernel that computes nothing (`ops_run` left it copies only) after what it copies
      (`cpp_fused_layout_copy`, `cpp_fused_cat`), not after the neighbours its name lists:
      `cpp_fused_relu_0`, the copy of the input into channels-last, was of the kind `cpp_fused_relu`,
      an element-wise kind that fusion off's relu kernels share, so a pair's time moved by kind set
      the copy against the relus and the time against eager counted it as element-wise;
    - a kernel that runs a tensor operator's part (its bias, the operator itself a library call)
      with `bias` for that part (`cpp_fused_bias_hardswish_mean`, `cpp_fused_bias`): named
      `cpp_fused_addmm_hardswish_mean_view`, mobilenet_v3_small's kernel after MKL's linear, which
      adds the bias and runs the hardswish, was of a kind whose time counted as matrix multiply
      (harness/reporting/op_classes.py), the matrix multiply's own time being `mkl::_mkl_linear`'s.
    The same for Triton's kernels on a GPU (`triton_poi_fused_convolution_relu_0`, cuDNN's convolution's
    bias and relu: `triton_poi_fused_bias_relu`), which CUPTI names as the wrapper does.
    Another kernel's kind is left to its name."""
    kinds = {}
    for group in groups:
        prefix = _GENERATED_PREFIX.match(group.kernel)
        ran = [PART_KIND if is_part_of_tensor_op(op) else op_name(op) for op in group.ops if not is_view_op(op)]
        if not prefix or not ran:
            continue
        copies = all(op == op_name(LAYOUT_COPY) or op in _COPYING for op in ran)
        if copies or PART_KIND in ran:
            kinds[group.kernel] = prefix.group(0).rstrip("_") + "_" + "_".join(dict.fromkeys(ran))
    return kinds


def _kernel_sources(tree: ast.Module) -> dict[str, str]:
    """Each kernel the module defines (`name = async_compile.triton('name', '''...''')`,
    `name = async_compile.cpp_pybinding([...], r'''...''')`), with its source: the longest string
    argument."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        value = node.value
        if not (isinstance(value, ast.Call) and (_dotted(value.func) or "").startswith("async_compile.")):
            continue
        texts = [arg.value for arg in value.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        if texts:
            found[node.targets[0].id] = max(texts, key=len)
    return found


def _find_call(tree: ast.Module) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise ValueError("no `call` function in Inductor's generated code")


def _calls_in_order(body: list[ast.stmt]) -> Iterator[ast.Call]:
    for stmt in body:
        if isinstance(stmt, (ast.With, ast.If, ast.For)):
            yield from _calls_in_order(stmt.body)
            continue
        value = getattr(stmt, "value", None)
        if isinstance(value, ast.Call):
            yield value


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _post_ops(call: ast.Call) -> tuple[str, ...]:
    found = [
        arg.value
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in _POST_OPS
    ]
    return tuple(f"aten.{op}" for op in found)
