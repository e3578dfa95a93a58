"""tofuc's Python package against the command line (docs/python.md).

Run by api's TestPythonPackage in `make test`, in a fresh virtual
environment after `pip install ./python`; TOFUC_BIN is the tofuc binary
and TOFUC_REPO the repository (its examples and test data)."""

import os
import subprocess
import tempfile
import unittest

import numpy as np

import tofuc

BIN = os.environ["TOFUC_BIN"]
REPO = os.environ["TOFUC_REPO"]
MLP = os.path.join(REPO, "examples", "mlp.tdl")
GRU = os.path.join(REPO, "frontend", "onnx", "conform", "testdata", "torch", "gru-opset17", "model.onnx")


def cli(*args):
    """Runs tofuc with args; fails the test with its output if it fails."""
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("tofuc %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def save(self, name, a):
        np.save(self.path(name + ".npy"), a)
        return "%s=%s" % (name, self.path(name + ".npy"))


class Inference(Case):
    def test_mlp_equals_tofuc_run(self):
        m = tofuc.compile(MLP, batch=4, seed=1, dir=self.path("plan"))
        self.assertEqual([s.name for s in m.inputs], ["x"])
        self.assertEqual(m.inputs[0].shape, (4, 784))
        x = self.rng.standard_normal((4, 784)).astype(np.float32)
        got = m(x)["logits"]
        cli("run", self.path("plan"), "--in", self.save("x", x), "--out", self.path("run"))
        want = np.load(self.path("run", "logits.npy"))
        np.testing.assert_array_equal(got, want)
        # By name, from float64 (converted within its kind), and again:
        # the same plan gives the same bits.
        np.testing.assert_array_equal(m(x=x.astype(np.float64))["logits"], want)
        self.assertEqual(m.report["model"], "mlp")
        self.assertEqual(m.plan["model"], "mlp")
        m.close()

    def test_dynamic_batch_equals_tofuc_run(self):
        m = tofuc.compile(MLP, dynamic="batch=1,4", seed=1, dir=self.path("plan"))
        self.assertEqual(m.dynamic["symbol"], "batch")
        self.assertEqual([s["n"] for s in m.dynamic["sizes"]], [1, 4])
        for n in (1, 3, 4, 9):
            x = self.rng.standard_normal((n, 784)).astype(np.float32)
            got = m(x)["logits"]
            self.assertEqual(got.shape, (n, 10))
            cli("run", self.path("plan"), "--in", self.save("x", x), "--out", self.path("run%d" % n))
            np.testing.assert_array_equal(got, np.load(self.path("run%d" % n, "logits.npy")))
        with self.assertRaisesRegex(tofuc.Error, "784"):
            m(np.zeros((2, 783), np.float32))
        with self.assertRaisesRegex(tofuc.Error, "not saved"):
            m.save(self.path("copy"))
        m.close()

    def test_mlp_from_source_text(self):
        with open(MLP) as f:
            source = f.read()
        a = tofuc.compile(source, batch=2, seed=3)
        b = tofuc.compile(MLP, batch=2, seed=3)
        x = self.rng.standard_normal((2, 784)).astype(np.float32)
        np.testing.assert_array_equal(a(x)["logits"], b(x)["logits"])

    def test_onnx_equals_tofuc_eval(self):
        with open(GRU, "rb") as f:
            serialised = f.read()
        for model in (GRU, serialised):
            m = tofuc.compile(model)
            spec = m.inputs[0]
            x = self.rng.standard_normal(spec.shape).astype(np.float32)
            got = m(x)
            cli("eval", GRU, "--backend", "cpu", "--in", self.save(spec.name, x), "--out", self.path("eval"))
            self.assertEqual(sorted(got), sorted(s.name for s in m.outputs))
            for name, a in got.items():
                np.testing.assert_array_equal(a, np.load(self.path("eval", name + ".npy")))

    def test_torch_module(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch (Debian's python3-torch)")
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
        x = torch.randn(8, 16)
        m = tofuc.compile(net, example_inputs=(x,))
        got = list(m(x.numpy()).values())[0]
        np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    def test_errors_are_tofuc_errors(self):
        m = tofuc.compile(MLP, batch=4)
        x = np.zeros((4, 784), np.float32)
        with self.assertRaisesRegex(tofuc.Error, "no input y"):
            m(y=x)
        with self.assertRaisesRegex(tofuc.Error, r"input x is f32\[3 784\], the plan wants f32\[4 784\]"):
            m(np.zeros((3, 784), np.float32))
        with self.assertRaisesRegex(tofuc.Error, "without loss of kind"):
            m(np.zeros((4, 784), np.complex64))
        with self.assertRaisesRegex(tofuc.Error, "unknown loss"):
            tofuc.compile(MLP, train=True, loss="hinge")
        with self.assertRaisesRegex(tofuc.Error, "not a training plan"):
            m.train_step(x)
        with self.assertRaises(FileNotFoundError):
            tofuc.compile(self.path("missing.tdl"))
        with self.assertRaisesRegex(tofuc.Error, "parse|expected"):
            tofuc.compile("model broken<batch = 1>(x: f32[batch]) {\n")
        m.close()
        with self.assertRaisesRegex(tofuc.Error, "closed"):
            m(x)


class Edges(Case):
    """What a review found: scalars, models without parameters, file
    descriptors, temporary folders, argument types, output order."""

    def test_scalar_input_and_no_parameters(self):
        m = tofuc.compile("model s<n = 3>(a: f32[n], k: f32[]) {\n    return a * k, a + k\n}\n")
        self.assertEqual(m.param_specs, [])
        self.assertEqual(m.inputs[1].shape, ())
        out = m(np.arange(3, dtype=np.float32), np.float32(2))
        self.assertEqual(list(out), [s.name for s in m.outputs])  # in the plan's order
        np.testing.assert_array_equal(out[m.outputs[0].name], [0, 2, 4])
        np.testing.assert_array_equal(out[m.outputs[1].name], [2, 3, 4])

    def test_loads_do_not_leak_descriptors(self):
        tofuc.compile(MLP, batch=2, hidden=16, dir=self.path("plan")).close()
        x = np.zeros((2, 784), np.float32)
        fds = len(os.listdir("/proc/self/fd"))
        for _ in range(40):
            m = tofuc.load(self.path("plan"))
            m(x)
            m.close()
        self.assertLessEqual(len(os.listdir("/proc/self/fd")), fds + 2)

    def test_no_temporary_folder_left(self):
        private = self.path("tmp")
        os.mkdir(private)
        saved, tempfile.tempdir = tempfile.tempdir, private  # where the package writes sources
        try:
            for bad in (123, None, [1]):
                with self.assertRaisesRegex(tofuc.Error, "model must be a path"):
                    tofuc.compile(bad)
            with self.assertRaisesRegex(tofuc.Error, "syntax error"):
                tofuc.compile("model broken(x: f32[2]) {\n return\n")
            with open(MLP) as f:
                tofuc.compile(f.read(), batch=1).close()  # source text: a folder while compiling
        finally:
            tempfile.tempdir = saved
        self.assertEqual(os.listdir(private), [])

    def test_arguments(self):
        with self.assertRaisesRegex(tofuc.Error, "--devices must be 1 to"):
            tofuc.compile(MLP, devices=0)
        with self.assertRaisesRegex(tofuc.Error, "--objective must be time or bytes"):
            tofuc.compile(MLP, devices=2, objective="speed")
        with self.assertRaisesRegex(tofuc.Error, "jobs must not be negative"):
            tofuc.compile(MLP, jobs=-1)
        with self.assertRaisesRegex(tofuc.Error, "--threads 100000 is more than 1024"):
            tofuc.compile(MLP, threads=100000)
        with self.assertRaisesRegex(tofuc.Error, "not a number"):
            tofuc.compile(MLP, lr=float("nan"))
        with self.assertRaises(FileNotFoundError):
            tofuc.compile("/nonexistent/model")
        m = tofuc.compile(MLP, batch=np.int64(2), seed=np.uint32(1))  # NumPy scalars
        self.assertEqual(m.inputs[0].shape, (2, 784))
        with self.assertRaisesRegex(tofuc.Error, "not a training plan"):
            m.train_step(np.zeros((2, 784)), np.zeros(2, np.int64))
        with self.assertRaisesRegex(tofuc.Error, "a dict of arrays"):
            m.set_params([("b1", np.zeros(128))])


class Training(Case):
    STEPS = 100

    def test_100_steps_equal_tofuc_eval_train(self):
        x = self.rng.standard_normal((32, 784)).astype(np.float32)
        labels = self.rng.integers(0, 10, 32)
        m = tofuc.compile(MLP, train=True, batch=32, seed=1, lr=0.05)
        self.assertTrue(m.training)
        losses = [m.train_step(x=x, labels=labels) for _ in range(self.STEPS)]
        self.assertLess(losses[-1], losses[0] / 2)
        out = cli("eval", MLP, "--train", "--steps", str(self.STEPS), "--lr", "0.05", "--set", "batch=32", "--seed", "1",
                  "--backend", "cpu", "--in", self.save("x", x), "--in", self.save("labels", labels),
                  "--out", self.path("eval"))
        cli_losses = [float(l.split()[-1]) for l in out.splitlines() if l.startswith("step ")]
        self.assertEqual(len(cli_losses), self.STEPS)
        np.testing.assert_allclose(losses, cli_losses, rtol=1e-5)  # printed to 6 digits
        want = np.load(self.path("eval", "params.npz"))
        got = m.params
        self.assertEqual(sorted(got), sorted(want.files))
        for name in want.files:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)

    def test_adam_continues_after_save_and_load(self):
        x = self.rng.standard_normal((8, 784)).astype(np.float32)
        labels = self.rng.integers(0, 10, 8)
        t = tofuc.compile(MLP, train=True, batch=8, hidden=16, seed=4, optimizer="adam", lr=0.01)
        for _ in range(3):
            t.train_step(x, labels)
        t.save(self.path("adam"))
        t.train_step(x, labels)
        again = tofuc.load(self.path("adam"))
        again.train_step(x, labels)  # step 4, as t's last
        for name, a in t.params.items():
            np.testing.assert_array_equal(again.params[name], a, err_msg=name)

    def test_save_and_load(self):
        x = self.rng.standard_normal((32, 784)).astype(np.float32)
        labels = self.rng.integers(0, 10, 32)
        t = tofuc.compile(MLP, train=True, batch=32, seed=2, optimizer="adam")
        for _ in range(5):
            t.train_step(x=x, labels=labels)
        t.save_params(self.path("trained.npz"))
        # The inference plan takes the trained parameters by their names.
        m = tofuc.compile(MLP, batch=32, seed=9)
        before = m(x)["logits"]
        with self.assertRaisesRegex(tofuc.Error, "no parameter b1.m, b1.v"):
            m.load_params(self.path("trained.npz"))
        left_out = m.load_params(self.path("trained.npz"), strict=False)
        self.assertEqual(left_out, sorted(n + s for n in ("b1", "b2", "b3", "w1", "w2", "w3") for s in (".m", ".v")))
        after = m(x)["logits"]
        self.assertFalse(np.array_equal(before, after))
        m.save(self.path("saved"))
        again = tofuc.load(self.path("saved"))
        np.testing.assert_array_equal(again(x)["logits"], after)
        cli("run", self.path("saved"), "--in", self.save("x", x), "--out", self.path("run"))
        np.testing.assert_array_equal(np.load(self.path("run", "logits.npy")), after)
        trained = dict(np.load(self.path("trained.npz")))
        self.assertEqual(sorted(again.params), ["b1", "b2", "b3", "w1", "w2", "w3"])
        for name, a in again.params.items():
            np.testing.assert_array_equal(a, trained[name], err_msg=name)
        # A partial update keeps the others; a wrong shape is refused.
        again.params = {"b3": np.ones(10, np.float32)}
        np.testing.assert_array_equal(again.params["b3"], np.ones(10, np.float32))
        np.testing.assert_array_equal(again.params["w3"], trained["w3"])
        with self.assertRaisesRegex(tofuc.Error, r"parameter b3 is f32\[11\], the plan wants f32\[10\]"):
            again.params = {"b3": np.ones(11, np.float32)}


if __name__ == "__main__":
    unittest.main()
