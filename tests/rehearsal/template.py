"""A synthesized template read as CloudFormation would: physical names for the resources,
the intrinsic functions resolved, and each function's assets found in the cloud assembly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
#: Not us-east-1, the runtime's default: a function told no region would miss every table.
REGION = "eu-central-1"
ROOT = Path(__file__).resolve().parents[2]
TWINS = ROOT / "build" / "rehearsal" / "twins"


@dataclass
class Template:
    stack_name: str
    body: dict[str, Any]
    outdir: Path
    #: Attributes only known once a resource exists (a table's stream ARN, a key's id).
    known: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Overrides of resources served by the rehearsal's stand-ins (the search domain).
    endpoints: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def load(cls, outdir: Path) -> Template:
        (path,) = outdir.glob("*.template.json")
        return cls(path.name.removesuffix(".template.json"), json.loads(path.read_text()), outdir)

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.body["Resources"]
        return resources

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    # ------------------------------------------------------------------ names

    def physical(self, logical: str) -> str:
        """What ``Ref`` gives for a resource."""
        resource = self.resources[logical]
        kind, props = resource["Type"], resource.get("Properties", {})
        if (logical, "Ref") in self.known:
            return self.known[(logical, "Ref")]
        if kind == "AWS::DynamoDB::Table":
            return str(props["TableName"])
        if kind == "AWS::S3::Bucket":
            return str(props.get("BucketName") or f"{self.stack_name}-{logical}".lower()[:63])
        if kind == "AWS::Lambda::Function":
            name = props.get("FunctionName")
            return str(self.resolve(name) if name else f"{self.stack_name}-{logical}"[:64])
        if kind == "AWS::StepFunctions::StateMachine":
            return self.arn(logical)
        if kind == "AWS::SNS::Topic":
            return self.arn(logical)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.queue_name(logical)}"
        if kind == "AWS::ApiGateway::RestApi":
            return "rehearsal"
        if kind == "AWS::ApiGateway::Stage":
            return str(props["StageName"])
        return logical

    def queue_name(self, logical: str) -> str:
        props = self.resources[logical].get("Properties", {})
        return str(props.get("QueueName") or f"{self.stack_name}-{logical}"[:80])

    def arn(self, logical: str) -> str:
        kind = self.resources[logical]["Type"]
        props = self.resources[logical].get("Properties", {})
        if (logical, "Arn") in self.known:
            return self.known[(logical, "Arn")]
        if kind == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{props['TableName']}"
        if kind == "AWS::Lambda::Function":
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.physical(logical)}"
        if kind == "AWS::IAM::Role":
            return f"arn:aws:iam::{ACCOUNT}:role/{props.get('RoleName') or logical}"
        if kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{self.physical(logical)}"
        if kind == "AWS::StepFunctions::StateMachine":
            name = props.get("StateMachineName") or logical
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        if kind == "AWS::SQS::Queue":
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{self.queue_name(logical)}"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:{props.get('TopicName') or logical}"
        if kind == "AWS::OpenSearchService::Domain":
            return f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{props['DomainName']}"
        if kind == "AWS::KMS::Key":
            return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{self.physical(logical)}"
        return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:{logical}"

    def attribute(self, logical: str, name: str) -> str:
        if (logical, name) in self.endpoints:
            return self.endpoints[(logical, name)]
        if (logical, name) in self.known:
            return self.known[(logical, name)]
        if name == "Arn":
            return self.arn(logical)
        if name == "RootResourceId":
            return "root"
        raise KeyError(f"{logical}.{name} is not known to the rehearsal")

    # ------------------------------------------------------------- intrinsics

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((name, arg),) = value.items()
            if name == "Ref":
                return self._ref(arg)
            if name == "Fn::GetAtt":
                return self.attribute(*arg)
            if name == "Fn::Join":
                return str(arg[0]).join(str(self.resolve(p)) for p in arg[1])
            if name == "Fn::Select":
                return self.resolve(arg[1])[int(arg[0])]
            if name == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
            if name == "Fn::Sub":
                return self._sub(arg)
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }
        return pseudo[name] if name in pseudo else self.physical(name)

    def _sub(self, arg: Any) -> str:
        text, names = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

        def one(match: re.Match[str]) -> str:
            key = match.group(1)
            if key in names:
                return str(self.resolve(names[key]))
            if "." in key and not key.startswith("AWS::"):
                return self.attribute(*key.split(".", 1))
            return self._ref(key)

        return re.sub(r"\$\{([^}]+)\}", one, text)

    # ---------------------------------------------------------------- assets

    def asset_dir(self, code: dict[str, Any]) -> Path:
        """The cloud assembly folder behind a function's or a layer's S3 key."""
        digest = str(code["S3Key"]).removesuffix(".zip")
        manifest = json.loads((self.outdir / f"{self.stack_name}.assets.json").read_text())
        source = manifest["files"][digest]["source"]
        return self.outdir / source["path"]


def host_twin(asset: Path, inner: str = "python", log: Callable[[str], None] = print) -> Path:
    """A twin of a built asset for this machine (a layer, whose packages are under
    ``python/``, or a function bundled with packages of its own, ``inner=""``): the
    asset's own files, with each distribution that ships native code replaced by the same
    version's wheel for this platform and Python. Cached by the asset's folder name (its
    hash); returns the folder to put on the path."""
    twin = TWINS / asset.name
    if twin.exists():
        return twin / inner if inner else twin
    # Staged under a name of this asset and this process: test processes running side by
    # side (pytest-xdist) may build twins at once, of the same asset or of others. (An
    # asset's name is ``asset.<hash>``: ``with_suffix`` would give every one the same.)
    staging = TWINS / f"{asset.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / inner if inner else staging
    shutil.copytree(asset / inner if inner else asset, site, symlinks=True)
    native = []
    for wheel in sorted(site.glob("*.dist-info/WHEEL")):
        if "Root-Is-Purelib: false" not in wheel.read_text():
            continue
        info = wheel.parent
        meta = (info / "METADATA").read_text().splitlines()
        name = next(line.split(": ", 1)[1] for line in meta if line.startswith("Name: "))
        version = next(line.split(": ", 1)[1] for line in meta if line.startswith("Version: "))
        for line in (info / "RECORD").read_text().splitlines():
            path = site / line.split(",", 1)[0]
            if path.is_file():
                path.unlink()
        shutil.rmtree(info, ignore_errors=True)
        native.append(f"{name}=={version}")
    for stray in site.rglob("*.so"):  # extension modules built for the layer's platform
        if "aarch64" in stray.name or "cpython-314" in stray.name:
            stray.unlink()
    if native:
        native_dir = TWINS / f"{asset.name}.native-{os.getpid()}"
        shutil.rmtree(native_dir, ignore_errors=True)
        log(f"host twin of {asset.name}: {', '.join(native)} for this platform")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "--target",
                str(native_dir),
                *native,
            ],
            check=True,
        )
        shutil.copytree(native_dir, site, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(native_dir)
    try:
        staging.rename(twin)
    except OSError:  # another process finished the same twin first: keep its copy
        if not twin.exists():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return twin / inner if inner else twin
