"""deploy/: the served deployments, prefect.yaml and the Dask cluster examples, checked without a server."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from unittest import mock

import pytest
import yaml

from flows.release import release
from sdc_tasks.errors import SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.spec import DaskSpec, load_spec
from sdc_tasks.tls import TlsFiles
from sdc_tasks.worker_heap import HEAP_ENVIRONMENT

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def load_script(path: Path):
    """Import a deploy/ script as a module (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def serve_module():
    """deploy/serve.py as a module."""
    return load_script(DEPLOY / "serve.py")


def crons(deployment) -> list[tuple[str, str]]:
    """(cron, timezone) of each schedule of a deployment."""
    return [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules]


def test_default_deployments_are_nightly_and_monthly(serve_module, tmp_path):
    spec = bundled_path("demo.yaml")
    deployments = serve_module.release_deployments(spec, tmp_path / "out")
    by_name = {d.name: d for d in deployments}
    assert set(by_name) == {"census-demo-nightly", "census-demo-monthly"}
    assert crons(by_name["census-demo-nightly"]) == [("0 2 * * *", "UTC")]
    assert crons(by_name["census-demo-monthly"]) == [("0 3 1 * *", "UTC")]
    for cadence in ("nightly", "monthly"):
        d = by_name[f"census-demo-{cadence}"]
        assert d.parameters == {"spec_path": str(spec.resolve()), "out_dir": str(tmp_path / "out" / cadence),
                                "overwrite": True}
        assert d.flow_name == "release" and d.entrypoint == "flows.release.release"
        assert d.concurrency_limit == 1
        release.validate_parameters(d.parameters)


def test_command_line_sets_schedules_timezone_and_cluster(serve_module, tmp_path):
    args = serve_module.argument_parser().parse_args([
        "--spec", str(bundled_path("demo.yaml")), "--out", str(tmp_path),
        "--schedule", "weekly=0 4 * * 1", "--schedule", "quarterly=30 5 1 1,4,7,10 *",
        "--timezone", "Europe/Madrid", "--dask-address", "tcp://10.0.0.5:8786"])
    deployments = serve_module.release_deployments(args.spec, args.out, dict(args.schedule), args.timezone,
                                                   args.dask_address)
    assert [(d.name, crons(d)) for d in deployments] == [
        ("census-demo-weekly", [("0 4 * * 1", "Europe/Madrid")]),
        ("census-demo-quarterly", [("30 5 1 1,4,7,10 *", "Europe/Madrid")])]
    assert all(d.parameters["dask_address"] == "tcp://10.0.0.5:8786" for d in deployments)
    assert deployments[1].parameters["out_dir"] == str(tmp_path.resolve() / "quarterly")


@pytest.mark.parametrize("text,message", [("nightly", "expected NAME=CRON"), ("=0 2 * * *", "expected NAME=CRON"),
                                          ("nightly=0 2 * *", "Invalid cron string")])
def test_bad_schedule_is_refused_with_its_name(serve_module, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        serve_module.schedule_pair(text)


def test_bad_timezone_or_spec_fails_before_serving(serve_module, tmp_path):
    with pytest.raises(ValueError, match="timezone 'Mars/Olympus'"):
        serve_module.release_deployments(bundled_path("demo.yaml"), tmp_path, timezone="Mars/Olympus")
    with pytest.raises(SpecError, match="spec file not found"):
        serve_module.release_deployments(tmp_path / "missing.yaml", tmp_path)


def test_prefect_yaml_validates_and_matches_the_flow():
    from prefect.cli.deploy._models import PrefectYamlModel
    from prefect.flows import load_flow_from_entrypoint
    from prefect.schedules import Cron

    raw = yaml.safe_load((DEPLOY / "prefect.yaml").read_text())
    model = PrefectYamlModel.model_validate(raw)
    assert [d.name for d in model.deployments] == ["census-rankswap-nightly", "census-demo-monthly"]
    root = DEPLOY.parent
    for d in model.deployments:
        flow = load_flow_from_entrypoint(str(root / d.entrypoint))
        assert flow.name == "release"
        flow.validate_parameters(d.parameters)
        load_spec(root / d.parameters["spec_path"])
        assert d.work_pool.name == "sdc-process"
        for s in d.schedules:
            Cron(s.cron, timezone=s.timezone)
    assert [s.cron for d in model.deployments for s in d.schedules] == ["0 2 * * *", "0 3 1 * *"]


@pytest.mark.parametrize("name,expected", [("local.yaml", {"address": None, "workers": 4, "memory_limit": "8GiB"}),
                                           ("remote.yaml", {"address": "tls://10.0.0.5:8786"})])
def test_cluster_examples_are_valid_dask_sections(name, expected):
    dask = DaskSpec.model_validate(yaml.safe_load((DEPLOY / "cluster" / name).read_text())["dask"])
    assert {k: getattr(dask, k) for k in expected} == expected


def test_kubernetes_example_names_the_scheduler_service_it_documents():
    doc = yaml.safe_load((DEPLOY / "cluster" / "kubernetes.yaml").read_text())
    assert doc["kind"] == "DaskCluster" and doc["apiVersion"] == "kubernetes.dask.org/v1"
    ports = {p["name"]: p["port"] for p in doc["spec"]["scheduler"]["service"]["ports"]}
    assert ports["tcp-comm"] == 8786
    assert f"tcp://{doc['metadata']['name']}-scheduler:8786" in (DEPLOY / "cluster" / "kubernetes.yaml").read_text()
    (worker,) = doc["spec"]["worker"]["spec"]["containers"]
    assert " ".join(worker["args"]).endswith("--preload sdc_tasks.worker_heap")
    assert worker["env"] == [{"name": k, "value": str(v)} for k, v in HEAP_ENVIRONMENT.items()]


def test_command_line_reports_a_bad_spec_in_one_line(serve_module, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        serve_module.main(["--spec", str(tmp_path / "missing.yaml"), "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "error: spec file not found" in capsys.readouterr().err


class FakeSLURMCluster:
    """Stands in for dask_jobqueue.SLURMCluster: records its keyword arguments, submits nothing."""

    made: list[dict] = []
    scheduler_address = "tls://10.0.0.5:8786"

    def __init__(self, **kwargs):
        FakeSLURMCluster.made.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def scale(self, jobs):
        """No jobs are submitted."""


def test_slurm_helper_binds_its_scheduler_and_runs_everything_over_tls(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", types.SimpleNamespace(SLURMCluster=FakeSLURMCluster))
    slurm = load_script(DEPLOY / "cluster" / "slurm.py")
    released = []
    monkeypatch.setattr(slurm, "Client", mock.MagicMock())
    monkeypatch.setattr(slurm, "release", lambda spec, **kwargs: released.append((spec, kwargs)))
    tls = ["--tls-ca-file", "/s/ca.pem", "--tls-cert", "/s/cert.pem", "--tls-key", "/s/key.pem"]
    with pytest.raises(SystemExit):  # no TLS files: refused
        slurm.argument_parser().parse_args(["spec.yaml", "--queue", "compute", "--interface", "ib0"])
    slurm.main(["spec.yaml", "--queue", "compute", "--interface", "ib0", *tls])
    made = FakeSLURMCluster.made[-1]
    assert made["protocol"] == "tls://" and made["interface"] == "ib0"
    assert made["scheduler_options"] == {"dashboard_address": "127.0.0.1:8787"}
    assert made["job_script_prologue"] == ["export MALLOC_MMAP_THRESHOLD_=33554432"]
    assert made["worker_extra_args"] == ["--preload", "sdc_tasks.worker_heap"]
    security = made["security"]
    assert security.require_encryption
    for role in ("scheduler", "worker", "client"):
        assert security.get_tls_config_for_role(role) == {"ca_file": "/s/ca.pem", "cert": "/s/cert.pem",
                                                          "key": "/s/key.pem", "ciphers": None}
    assert released == [("spec.yaml", {"out_dir": None, "dask_address": "tls://10.0.0.5:8786", "overwrite": None,
                                       "tls_ca_file": "/s/ca.pem", "tls_cert": "/s/cert.pem",
                                       "tls_key": "/s/key.pem"})]


def test_served_releases_pass_tls_files_and_a_mismatch_fails_at_start_up(serve_module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = serve_module.argument_parser().parse_args([
        "--spec", str(bundled_path("demo.yaml")), "--out", "out", "--dask-address", "tls://10.0.0.5:8786",
        "--tls-ca-file", "ca.pem", "--tls-cert", "cert.pem", "--tls-key", "/etc/sdc/key.pem"])
    tls = TlsFiles(args.tls_ca_file, args.tls_cert, args.tls_key)
    deployment = serve_module.release_deployments(args.spec, args.out, None, "UTC", args.dask_address, tls)[0]
    assert {k: v for k, v in deployment.parameters.items() if k.startswith("tls_")} == {
        "tls_ca_file": str(tmp_path / "ca.pem"), "tls_cert": str(tmp_path / "cert.pem"),
        "tls_key": "/etc/sdc/key.pem"}
    release.validate_parameters(deployment.parameters)
    with pytest.raises(SpecError, match=r"dask.tls \(--tls-ca-file, --tls-cert, --tls-key\) is for a tls://"):
        serve_module.release_deployments(args.spec, args.out, None, "UTC", "tcp://10.0.0.5:8786", tls)
