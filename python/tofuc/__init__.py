"""tofuc from Python: compile a TDL or ONNX model (or a PyTorch module,
through torch.onnx.export) and run, train and save it on NumPy arrays.

    import numpy as np, tofuc
    m = tofuc.compile("examples/mlp.tdl", batch=4)
    out = m(x=np.random.rand(4, 784).astype(np.float32))   # {"y": array}
    t = tofuc.compile("examples/mlp.tdl", train=True, batch=32)
    loss = t.train_step(x=x, labels=labels)

Every argument of compile is the tofuc compile flag of the same name;
attributes of the model (--set NAME=VALUE) are keyword arguments. See
docs/python.md.
"""

import json
import os
import shutil
import tempfile
from collections import namedtuple

import numpy as np

from ._lib import DTYPES, NAMES, Error, call

__all__ = ["compile", "load", "Model", "Spec", "Error"]

Spec = namedtuple("Spec", "name dtype shape")
Spec.__doc__ = "A tensor a plan takes or gives: its name, tofuc dtype and shape."


def compile(model, *, graph=None, devices=1, train=False, loss="cross_entropy", optimizer="sgd", lr=0.0,
            loss_scale=0.0, lr_schedule="", clip_norm=0.0, precision="exact", backends=None, no_optimize=False, memory=0, objective="", seed=0, dir=None,
            backend="cpu", threads=0, jobs=0, example_inputs=None, dynamic=None, **attrs):
    """Compiles a model as `tofuc compile` does and opens it on backend
    (cpu: host kernels; simt: the GPU kernels, emulated).

    model is a path to a .tdl or .onnx file, TDL source text, an ONNX
    model (onnx.ModelProto, or its serialised bytes), or a torch.nn.Module
    with example_inputs (a tensor or a tuple of them) for
    torch.onnx.export. graph names the model of a file with several;
    attrs override the model's attributes (batch=32). dir keeps the
    compiled plan there (default: a temporary folder, removed at close).
    dynamic="batch" (or "batch=1,8,64") compiles for any batch size, as
    tofuc compile --dynamic: the model is then called on arrays of any
    batch, and self.dynamic describes it (self.inputs and self.outputs
    are then those of its largest size compiled).
    """
    if isinstance(backends, str):
        backends = backends.split(",")
    source = _Source(model, example_inputs)
    try:
        args = {"path": source.path, "graph": graph or "", "set": [_attr(k, v) for k, v in attrs.items()],
                "dir": os.fspath(dir) if dir is not None else "", "devices": devices, "memory": memory, "objective": objective,
                "no_optimize": no_optimize, "precision": precision, "backends": list(backends or []), "train": train,
                "loss": loss, "optimizer": optimizer, "lr": lr, "loss_scale": loss_scale, "lr_schedule": lr_schedule, "clip_norm": clip_norm, "seed": seed, "jobs": jobs,
                "backend": backend, "threads": threads, "dynamic": dynamic or ""}
        reply, _ = call({"op": "compile", "compile": args})
    finally:
        source.close()
    return Model(reply)


def load(dir, *, backend="cpu", threads=0):
    """Opens a plan that tofuc compile -o or Model.save wrote into dir,
    with the parameters it records."""
    reply, _ = call({"op": "open", "dir": os.fspath(dir), "backend": backend, "threads": threads})
    return Model(reply)


class Model:
    """A compiled plan open on a runtime, with its parameters."""

    def __init__(self, reply):
        self._handle = reply["model"]
        info = reply["info"]
        self.dir = info["dir"]
        self.backend = info["backend"]
        self.graph = info["graph"]
        self.devices = info["devices"]
        self.precision = info["precision"]
        self.inputs = [_spec(b) for b in info.get("inputs") or []]
        self.outputs = [_spec(b) for b in info.get("outputs") or []]
        self.param_specs = [_spec(b) for b in info.get("params") or []]
        self.next = info.get("next") or {}
        self.cached = info.get("cached", False)
        self.dynamic = info.get("dynamic")

    def _call(self, op, tensors=(), **fields):
        if self._handle is None:
            raise Error("the model is closed")
        return call(dict(fields, op=op, model=self._handle), tensors)

    @property
    def training(self):
        """Whether this is a training plan (train_step updates its parameters)."""
        return bool(self.next)

    def __call__(self, *args, **kwargs):
        """Runs the plan once: inputs by position (in self.inputs' order)
        or by name; returns every output by name. A training plan's call
        returns its loss and updated parameters without keeping them
        (see train_step)."""
        _, arrays = self._call("run", self._inputs(args, kwargs, self.inputs))
        return arrays

    run = __call__

    def train_step(self, *args, step=0, **kwargs):
        """Runs one training step and keeps the parameters it updates for
        the next; returns the loss. The step's number (Adam's, and what
        dropout's masks are drawn from) is step, or the one after the
        last."""
        if not self.training:
            raise Error("%s is not a training plan: compile it with train=True" % self.graph)
        specs = [s for s in self.inputs if s.name not in _STEP_INPUTS]
        reply, _ = self._call("train_step", self._inputs(args, kwargs, specs), step=step)
        return reply["loss"]

    @property
    def params(self):
        """The parameters now, by name (fresh arrays)."""
        return self._call("params")[1]

    @params.setter
    def params(self, values):
        self.set_params(values)

    def set_params(self, values, strict=True):
        """Replaces the parameters named in values (a dict of arrays).
        With strict=False, arrays for no parameter of this plan (a
        training plan's optimizer state, given to an inference plan) are
        left out; returns their names."""
        if not isinstance(values, dict):
            raise Error("parameters are a dict of arrays by name, not %s" % type(values).__name__)
        specs = {s.name: s for s in self.param_specs}
        unknown = sorted(set(values) - set(specs))
        if unknown and strict:
            raise Error("the plan has no parameter %s (it has %s; strict=False leaves such arrays out)"
                        % (", ".join(unknown), ", ".join(sorted(specs))))
        tensors = [(name, _array(a, specs[name], "parameter")) for name, a in values.items() if name in specs]
        self._call("set_params", tensors)
        return unknown

    def save_params(self, path):
        """Writes the parameters to a .npz file (np.load reads it)."""
        np.savez(path, **self.params)

    def load_params(self, path, strict=True):
        """Reads parameters from a .npz file (save_params's, or tofuc's
        params.npz), as set_params does."""
        with np.load(path) as f:
            return self.set_params({k: f[k] for k in f.files}, strict=strict)

    def save(self, dir):
        """Writes the plan with its parameters now into dir: tofuc.load
        and `tofuc run DIR` run it."""
        self._call("save", dir=os.fspath(dir))

    @property
    def plan(self):
        """The plan (plan.json, docs/plan.md) as a dict."""
        with open(os.path.join(self.dir, "plan.json")) as f:
            return json.load(f)

    @property
    def report(self):
        """The compile's report (report.json, docs/report.md) as a dict,
        or None if the plan has none."""
        path = os.path.join(self.dir, "report.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    @property
    def report_path(self):
        """The report a person reads (report.html), or None."""
        path = os.path.join(self.dir, "report.html")
        return path if os.path.exists(path) else None

    def close(self):
        """Frees the plan (and its temporary folder)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            call({"op": "close", "model": handle})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        ins = ", ".join("%s: %s%s" % (s.name, s.dtype, list(s.shape)) for s in self.inputs)
        return "<tofuc.Model %s (%s) on %s%s>" % (self.graph, ins, self.backend, ", training" if self.training else "")

    def _inputs(self, args, kwargs, specs):
        if len(args) > len(specs):
            raise Error("%s takes %d inputs (%s), %d given" % (self.graph, len(specs), ", ".join(s.name for s in specs), len(args)))
        given = dict(zip((s.name for s in specs), args))
        for name, a in kwargs.items():
            if name in given:
                raise Error("input %s given twice" % name)
            given[name] = a
        by_name = {s.name: s for s in self.inputs}
        tensors = []
        for name, a in given.items():
            if name not in by_name:
                raise Error("%s has no input %s (its inputs: %s)" % (self.graph, name, ", ".join(s.name for s in specs)))
            tensors.append((name, _array(a, by_name[name], "input")))
        return tensors


# The inputs of a training plan that train_step sets at each step
# (autodiff.StepValues): Adam's step number and dropout's seed.
_STEP_INPUTS = ("step", "dropout_seed")


def _spec(binding):
    return Spec(binding["name"], binding["dtype"], tuple(binding["shape"]))


def _array(a, spec, what):
    """a as a C-contiguous array of spec's dtype: no copy when it is one
    already; a conversion only within a kind (f64 to f32, i64 to i32)
    or from integers or booleans to floats."""
    if hasattr(a, "detach") and hasattr(a, "numpy"):  # a torch tensor
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    want = np.dtype(DTYPES[spec.dtype])
    if a.dtype != want and not np.can_cast(a.dtype, want, "same_kind"):
        raise Error("%s %s is %s, which does not convert to %s without loss of kind" % (what, spec.name, a.dtype, spec.dtype))
    return np.asarray(a, dtype=want, order="C")  # a 0-d array stays 0-d


def _attr(name, value):
    """An attribute as --set writes it."""
    if isinstance(value, (bool, np.bool_)):
        return "%s=%s" % (name, "true" if value else "false")
    if isinstance(value, (list, tuple)):
        return "%s=[%s]" % (name, ", ".join(_attr("", v)[1:] for v in value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "%s=%r" % (name, value.item() if isinstance(value, np.generic) else value)
    return "%s=%s" % (name, json.dumps(str(value)))


class _Source:
    """The model as a file the compiler reads: the path given, or a
    temporary file holding the source, the ONNX model or the export."""

    def __init__(self, model, example_inputs):
        self._tmp = None
        if isinstance(model, os.PathLike) or isinstance(model, str) and _looks_like_path(model):
            self.path = os.fspath(model)
            if not os.path.exists(self.path):
                raise FileNotFoundError(self.path)
            return
        torch_module = _is_torch_module(model)
        if not isinstance(model, (str, bytes, bytearray)) and not hasattr(model, "SerializeToString") and not torch_module:
            raise Error("model must be a path, TDL source, an ONNX model or a torch.nn.Module, not %s" % type(model).__name__)
        if torch_module and example_inputs is None:
            raise Error("a PyTorch module compiles through torch.onnx.export: give example_inputs")
        self._tmp = tempfile.mkdtemp(prefix="tofuc-source-")
        try:
            self._write_model(model, example_inputs)
        except BaseException:
            self.close()
            raise

    def _write_model(self, model, example_inputs):
        if isinstance(model, str):
            self.path = self._write("model.tdl", model.encode())
        elif isinstance(model, (bytes, bytearray)):
            self.path = self._write("model.onnx", bytes(model))
        elif hasattr(model, "SerializeToString"):
            self.path = self._write("model.onnx", model.SerializeToString())
        else:
            import torch
            self.path = os.path.join(self._tmp, "model.onnx")
            torch.onnx.export(model, example_inputs, self.path, opset_version=17)

    def _write(self, name, data):
        path = os.path.join(self._tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def close(self):
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _looks_like_path(s):
    """A string is TDL source if it has a line break or a brace, else a path."""
    return "\n" not in s and "{" not in s


def _is_torch_module(m):
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(m).__mro__)
