"""The runtime layer, built by local bundling: pip with the Lambda platform's wheels.

There is no Docker here, so nothing is built in a container: pip installs binary wheels
for Linux arm64 and the target Python (``--platform``, ``--only-binary``), and the
``memvault`` package is copied beside them. Builds are cached by their inputs.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra import settings

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "layers" / "memvault"
CACHE = ROOT / "build" / "layer"
#: Provided by the Lambda Python runtime; left out to keep the layer small.
PROVIDED = ("boto3", "botocore", "s3transfer")


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [r for r in project["dependencies"] if not r.startswith(PROVIDED)]


def inputs_hash() -> str:
    digest = hashlib.sha256()
    digest.update("\n".join(requirements()).encode())
    digest.update(f"{settings.WHEEL_PLATFORM}/{settings.PYTHON_VERSION}".encode())
    for path in sorted(SOURCE.rglob("*.py")):
        digest.update(str(path.relative_to(SOURCE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build(target: Path) -> Path:
    """Build (or reuse) the layer's ``python/`` tree; returns the cached folder."""
    cached = CACHE / inputs_hash()
    if not (cached / "python").exists():
        staging = cached.with_suffix(".partial")
        shutil.rmtree(staging, ignore_errors=True)
        site = staging / "python"
        subprocess.run(  # noqa: S603 - fixed arguments
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--platform",
                settings.WHEEL_PLATFORM,
                "--implementation",
                "cp",
                "--python-version",
                settings.PYTHON_VERSION,
                "--only-binary=:all:",
                "--target",
                str(site),
                *requirements(),
            ],
            check=True,
        )
        for name in PROVIDED:
            for path in site.glob(f"{name}*"):
                shutil.rmtree(path, ignore_errors=True)
        for path in site.rglob("__pycache__"):
            shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(
            SOURCE, site / "memvault", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        staging.rename(cached)
    shutil.copytree(cached, target, dirs_exist_ok=True)
    return cached


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        build(Path(output_dir))
        return True


def runtime_layer_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(SOURCE.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=inputs_hash(),
        bundling=BundlingOptions(
            # Never pulled: local bundling always succeeds or fails loudly.
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.14"),
            local=PipLocalBundling(),
        ),
    )
