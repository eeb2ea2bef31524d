"""Checksums of a spaCy project's assets, enforced.

weasel reports an asset whose md5 does not match `project.yml` but exits 0 and
keeps the file, so a workflow would go on with damaged data. `verify_assets`
makes the mismatch an error that names the file, run before conversion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List

import srsly
from spacy.cli._util import Arg

from ..errors import AssetError
from ..files import file_digest
from .app import flat_cli


def md5sum(path: Path) -> str:
    """RETURNS (str): The hex md5 of a file's content, as project.yml's checksums give it."""
    return file_digest(path, "md5")


def verify_assets(project_dir: Path, prefix: str) -> List[Path]:
    """Check every asset of `project_dir/project.yml` whose dest starts with `prefix`.

    RETURNS (List[Path]): The checked files.
    RAISES (AssetError): Naming each missing file and each checksum mismatch.
    """
    project = srsly.read_yaml(project_dir / "project.yml")
    assets = [a for a in project.get("assets", []) if str(a.get("dest", "")).startswith(prefix)]
    if not assets:
        raise AssetError(f"{project_dir / 'project.yml'}: no asset under {prefix!r}")
    problems: List[str] = []
    checked: List[Path] = []
    for asset in assets:
        path = project_dir / asset["dest"]
        if not path.is_file():
            problems.append(f"{path}: missing (run `spacy project assets`)")
            continue
        expected = asset.get("checksum")
        if expected:
            actual = md5sum(path)
            if actual != expected:
                problems.append(f"{path}: md5 {actual}, project.yml expects {expected} (damaged or a different file)")
                continue
        checked.append(path)
    if problems:
        raise AssetError("; ".join(problems))
    return checked


@flat_cli.command("verify-assets")
def verify_assets_cli(
    project: Annotated[Path, Arg()],
    prefix: Annotated[str, Arg(help="check the assets whose dest starts with this, e.g. assets/resume/")],
) -> None:
    """check a project's assets against their md5 in project.yml"""
    for path in verify_assets(project, prefix):
        print(f"md5 ok: {path}")
