"""What the commands ask the portal, as small typed functions over `Api`."""

from __future__ import annotations

import io
import json
import re
import urllib.parse
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from atrex_cli.client import Api, CliError, NotFound, ServerError

_NAMED_VERSION = re.compile(r"^(?P<name>.+?)(?:@v?(?P<version>\d+))?$")


def releases(api: Api) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get_json("/api/releases/")
    return found


def capability_summary(api: Api) -> str:
    """What the portal says it can evaluate, in one sentence ("" from a portal too old to)."""
    try:
        found: dict[str, Any] = api.get_json("/api/capability/")
    except NotFound:
        return ""
    return str(found.get("summary") or "")


def find_release(api: Api, spec: str | None) -> dict[str, Any]:
    """A release by id (`3`), name (newest version: `atrex-starter`) or `name@v2`.

    Without a spec: the newest version when the portal has releases of one name only.
    """
    known = releases(api)
    if not known:
        raise NotFound("the portal has no releases yet")
    if spec is None:
        names = sorted({r["name"] for r in known})
        if len(names) > 1:
            raise CliError(f"name a release: {', '.join(names)}")
        spec = names[0]
    if spec.isdigit():
        chosen = [r for r in known if r["id"] == int(spec)]
    else:
        match = _NAMED_VERSION.match(spec)
        assert match is not None  # the pattern matches any non-empty string
        chosen = [r for r in known if r["name"] == match["name"]
                  and (match["version"] is None or r["version"] == int(match["version"]))]
    if not chosen:
        listed = ", ".join(f"{r['name']}@v{r['version']} (id {r['id']})" for r in known)
        raise NotFound(f"no release {spec!r} on this portal (releases: {listed})")
    return max(chosen, key=lambda r: int(r["version"]))


def operators(api: Api, release: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get_json(f"/api/releases/{release['id']}/operators/")
    return found


def download_bundle(api: Api, release: dict[str, Any], operator: str | None,
                    out: Path) -> list[Path]:
    """Unpack the release's agent-visible files under `out` (`<release>/data/<operator>/`)
    and a `release.json` with its DSL settings, so `evaluate-local` can use the folder."""
    params = {"operator": operator} if operator else None
    data = api.get_bytes(f"/api/releases/{release['id']}/bundle/", params)
    written = []
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ServerError("the portal's bundle is not a zip archive") from None
    with archive:
        for member in archive.infolist():
            if member.is_dir():
                continue
            target = out / _safe_member(member.filename)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
            written.append(target)
    name = _safe_member(release["name"])
    if len(name.parts) != 1:
        raise ServerError(f"the release's name is not a folder name: {release['name']!r}")
    settings = out / name / "release.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    accepted = release.get("accepted_dsls")  # absent from portals before 2026-12-02
    settings.write_text(json.dumps({"dsl": release["dsl"],
                                    "dsl_ratio_threshold": release["dsl_ratio_threshold"],
                                    **({"dsls": accepted} if accepted else {})}) + "\n")
    written.append(settings)
    return written


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name:
        raise ServerError(f"the bundle holds an unsafe path: {name!r}")
    return path


def submission(api: Api, submission_id: int, wait: float = 0.0) -> dict[str, Any]:
    """The submission; `wait` > 0 long-polls: the portal answers once the evaluation has
    settled or after `wait` seconds (at most 60)."""
    params = {"wait": f"{min(wait, 60.0):g}"} if wait > 0 else None
    found: dict[str, Any] = api.get_json(f"/api/submissions/{submission_id}/", params,
                                         team=True)
    return found


def profile(api: Api, submission_id: int) -> dict[str, Any] | None:
    """The submission's per-shape profile; None from a portal that has none."""
    try:
        found: dict[str, Any] = api.get_json(f"/api/submissions/{submission_id}/profile/",
                                             team=True)
    except NotFound:
        return None
    return found


def ncu_profiles(api: Api, submission_id: int) -> list[dict[str, Any]]:
    """The submission's ncu profiles, newest first."""
    found: list[dict[str, Any]] = api.get_json(f"/api/submissions/{submission_id}/ncu/",
                                               team=True)
    return found


def ncu_profile_request(api: Api, submission_id: int, operator: str,
                        shape: str) -> dict[str, Any]:
    made: dict[str, Any] = api.post_form(f"/api/submissions/{submission_id}/ncu/",
                                         {"operator": operator, "shape": shape})
    return made


def board(api: Api, release: dict[str, Any], hardware: str, board_name: str,
          operator: str | None, csv: bool) -> bytes:
    """A board's export: JSON (rows and baselines) or CSV, as the board pages show it."""
    path = f"/api/boards/{release['id']}/{hardware}/"
    params = {"board": board_name}
    if operator:
        path += f"operators/{operator}/"
        params = {}
    if csv:
        params["format"] = "csv"
    return api.get_bytes(path, params)


def operator_history(api: Api, operator: str, params: dict[str, str]) -> dict[str, Any]:
    """The team's submissions of one operator, oldest first (`release`, `hardware` narrow it)."""
    path = f"/api/team/history/{urllib.parse.quote(operator, safe='')}/"
    found: dict[str, Any] = api.get_json(path, params or None, team=True)
    return found


def compare(api: Api, a: int, b: int) -> dict[str, Any]:
    """Submission B against A: per shape and operator, with each operator's source diff."""
    found: dict[str, Any] = api.get_json(f"/api/submissions/{a}/compare/{b}/", team=True)
    return found


def submissions(api: Api) -> list[dict[str, Any]]:
    """The team's newest submissions (at most 100), newest first."""
    found: list[dict[str, Any]] = api.get_json("/api/submissions/", team=True)
    return found


def cancel(api: Api, submission_id: int) -> dict[str, Any]:
    done: dict[str, Any] = api.post_form(f"/api/submissions/{submission_id}/cancel/")
    return done


def problem(api: Api, release: dict[str, Any], operator: str) -> dict[str, Any]:
    """One operator as a problem: files, tolerance, shapes with their public labels, the
    hardware profiles' peaks."""
    path = f"/api/releases/{release['id']}/operators/{urllib.parse.quote(operator, safe='')}/"
    found: dict[str, Any] = api.get_json(path)
    return found


def token_info(api: Api) -> dict[str, Any]:
    """The team, name and scope of the client's token."""
    found: dict[str, Any] = api.get_json("/api/token/", team=True)
    return found
