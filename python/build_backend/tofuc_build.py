"""A PEP 517 build backend for tofuc's Python package that needs nothing
from PyPI: the wheel holds the package's Python files and the C library
libtofuc.so, built here with `go build -buildmode=c-shared` from the
repository this folder is in (or, without Go or the repository, the one
`make python` left in tofuc/)."""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "tofuc"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)
LIB = "libtofuc.so"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _library(tmp):
    """Builds libtofuc.so into tmp, or returns the one built before."""
    go = os.environ.get("GO") or shutil.which("go")
    if go and os.path.exists(os.path.join(REPO, "go.mod")):
        out = os.path.join(tmp, LIB)
        print("tofuc: building %s with %s (about a minute the first time)" % (LIB, go), file=sys.stderr)
        subprocess.run([go, "build", "-buildmode=c-shared", "-o", out, "./cmd/libtofuc"], cwd=REPO, check=True)
        return out
    prebuilt = os.path.join(HERE, NAME, LIB)
    if os.path.exists(prebuilt):
        return prebuilt
    raise RuntimeError("tofuc: no Go toolchain and no prebuilt %s: install Go, or run `make python` in the repository" % LIB)


def _tag():
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-" + platform


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: tofuc, the TDL tensor compiler, from Python\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy\n" % (NAME, VERSION))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tag = _tag()
    wheel = "%s-%s-%s.whl" % (NAME, VERSION, tag)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name in sorted(os.listdir(os.path.join(HERE, NAME))):
            if name.endswith(".py"):
                with open(os.path.join(HERE, NAME, name), "rb") as f:
                    files.append(("%s/%s" % (NAME, name), f.read()))
        with open(_library(tmp), "rb") as f:
            files.append(("%s/%s" % (NAME, LIB), f.read()))
        files.append((info + "/METADATA", _metadata().encode()))
        files.append((info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: tofuc_build\nRoot-Is-Purelib: false\nTag: %s\n" % tag).encode()))
        record = [_record_line(a, d) for a, d in files] + [info + "/RECORD,,"]
        files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
            for arcname, data in files:
                zi = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
                zi.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
                z.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return wheel
