"""The scheduled path through Prefect's client against a test server: a deployment of the release flow is
registered, listed, run, picked up by a runner (what ``deploy/serve.py`` serves with) and writes its release
under the releases root. The Prefect CLI commands themselves are run by ``deploy/check_prefect_cli.sh``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import yaml

from sdc_tasks.generate import bundled_path

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def serve_script():
    """deploy/serve.py as a module (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location("serve", DEPLOY / "serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small_spec(tmp_path: Path) -> Path:
    """A quick release spec of the bundled Census file: rank swapping, information loss only, one worker."""
    spec = {"name": "census-scheduled", "input": {"path": str(bundled_path("census.csv")), "format": "csv"},
            "id_column": "record_id", "create_id": True,
            "variables": {"continuous": ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX"],
                          "pass_through": ["PTOTVAL", "STATETAX", "TAXINC", "POTHVAL", "INTVAL", "PEARNVAL", "FICA",
                                           "WSALVAL", "ERNVAL"]},
            "steps": [{"method": "rankswap", "params": {"p": 15}}], "metrics": ["il"],
            "output": {"dir": str(tmp_path / "spec-output")}, "seed": 1, "dask": {"workers": 1}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


async def served_once(deployment) -> None:
    """Run the flow runs of ``deployment`` that are due, once, as ``serve`` does, and wait for them."""
    from prefect.runner import Runner

    runner = Runner(limit=1)
    await runner.add_deployment(deployment)
    await runner.start(run_once=True)


def test_a_deployment_is_listed_run_and_served_into_the_releases_root(prefect_harness, tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    monkeypatch.setenv("SDC_RELEASES_ROOT", str(tmp_path / "releases"))
    serve = serve_script()
    [deployment] = serve.release_deployments(small_spec(tmp_path), None, {"nightly": "0 2 * * *"})
    assert deployment.parameters["out_dir"] == str(tmp_path / "releases" / "census-scheduled" / "nightly")
    deployment_id = deployment.apply()

    with get_client(sync_client=True) as client:
        listed = {f"release/{d.name}": d.id for d in client.read_deployments()}  # HTTP 422 with fastapi>=0.151
        assert listed["release/census-scheduled-nightly"] == deployment_id
        assert client.read_deployment_by_name("release/census-scheduled-nightly").schedules[0].schedule.cron == \
            "0 2 * * *"

    flow_run = run_deployment("release/census-scheduled-nightly", timeout=0)
    assert flow_run.state.is_scheduled()
    asyncio.run(served_once(deployment))

    with get_client(sync_client=True) as client:
        final = client.read_flow_run(flow_run.id).state
    assert final.is_completed(), final.message
    release = tmp_path / "releases" / "census-scheduled" / "nightly"
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["spec_name"] == "census-scheduled"
    assert (release / "masked").is_dir()
    assert not (tmp_path / "spec-output").exists()


def test_a_relative_out_dir_goes_under_the_releases_root(tmp_path, monkeypatch):
    from flows.release import release_overrides

    monkeypatch.setenv("SDC_RELEASES_ROOT", str(tmp_path / "root"))
    assert release_overrides(out_dir="census/nightly")["output.dir"] == str(tmp_path / "root" / "census/nightly")
    assert release_overrides(out_dir=str(tmp_path / "abs"))["output.dir"] == str(tmp_path / "abs")
    monkeypatch.delenv("SDC_RELEASES_ROOT")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert release_overrides(out_dir="x")["output.dir"] == str(tmp_path / "home" / "sdc-releases" / "x")
