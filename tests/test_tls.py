"""The secure cluster path: TLS to an existing Dask scheduler (spec, CLI options, Dask config), refusals that
name the setting or the address, and a LocalCluster that listens on loopback only."""

from __future__ import annotations

import datetime
import ipaddress
import logging
import shutil
from pathlib import Path

import dask
import pandas as pd
import psutil
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from distributed import LocalCluster
from distributed.security import Security
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.cluster import client_security, dask_client
from sdc_tasks.errors import InputError, SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.spec import load_spec, parse_spec
from sdc_tasks.tls import TlsFiles

runner = CliRunner()


def _pem_key(key) -> bytes:
    """A private key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificate(subject: str, key, issuer: x509.Name | None, issuer_key, ca: bool) -> x509.Certificate:
    """A certificate for ``subject`` valid for a day, signed by ``issuer_key`` (self-signed without an issuer);
    a leaf certificate names localhost and 127.0.0.1."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def write_certificates(folder: Path) -> TlsFiles:
    """A new CA and one certificate and key it signed (for the scheduler, the workers and the client), as PEM
    files in ``folder``."""
    folder.mkdir(parents=True)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("sdc test CA", ca_key, None, ca_key, ca=True)
    leaf = _certificate("localhost", key, ca.subject, ca_key, ca=False)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "cert.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(_pem_key(key))
    return TlsFiles(str(folder / "ca.pem"), str(folder / "cert.pem"), str(folder / "key.pem"))


def tls_options(files: TlsFiles) -> list[str]:
    """The CLI options naming ``files``."""
    return ["--tls-ca-file", files.ca_file, "--tls-cert", files.cert, "--tls-key", files.key]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, TlsFiles]:
    """The cluster's CA and certificate, and another CA's (which the cluster does not trust)."""
    root = tmp_path_factory.mktemp("tls")
    return {"cluster": write_certificates(root / "cluster"), "other": write_certificates(root / "other")}


@pytest.fixture(scope="module")
def tls_cluster(certificates):
    """An in-process cluster (scheduler and two workers) that speaks TLS only, on 127.0.0.1; closed at the end.
    Its logs stay below errors meanwhile: in this process they would reach the log handlers that a CLI run
    leaves bound to the runner's closed output."""
    files = certificates["cluster"]
    security = Security(tls_ca_file=files.ca_file, tls_scheduler_cert=files.cert, tls_scheduler_key=files.key,
                        tls_worker_cert=files.cert, tls_worker_key=files.key, tls_client_cert=files.cert,
                        tls_client_key=files.key, require_encryption=True)
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tls://", host="127.0.0.1",
                          security=security, dashboard_address=None) as cluster:
            yield cluster
    finally:
        logger.setLevel(level)


def scheduled_tasks(cluster) -> int:
    """How many task transitions the cluster's scheduler has made so far."""
    return cluster.scheduler.transition_counter


def write_release_spec(folder: Path, address: str, certificates: Path) -> Path:
    """A small MDAV release of the Census file over ``address``, the dask.tls files relative to the spec."""
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec.update(input={"path": str(bundled_path("census.csv"))}, metrics=["il", "dld"], output={"dir": "release"},
                gate={"max": {"DLD": 40.0}, "min_group_size": 3},
                dask={"address": address, "tls": {"ca_file": f"{certificates.name}/ca.pem",
                                                  "cert": f"{certificates.name}/cert.pem",
                                                  "key": f"{certificates.name}/key.pem"}})
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def census_pair(tmp_path) -> tuple[Path, Path]:
    """The Census file and a copy of it as the masked file (a quick evaluation)."""
    original = bundled_path("census.csv")
    return original, Path(shutil.copy(original, tmp_path / "masked.csv"))


def evaluate_args(pair: tuple[Path, Path], address: str) -> list[str]:
    """``sdc evaluate`` of the pair's information loss on the scheduler at ``address``."""
    original, masked = pair
    return ["evaluate", "--original", str(original), "--masked", str(masked), "--families", "il",
            "--vars", "FEDTAX,AGI,PTOTVAL", "--dask-address", address]


def test_release_runs_over_tls_with_the_spec_s_certificates(prefect_harness, tls_cluster, certificates, tmp_path):
    cluster_files = shutil.copytree(Path(certificates["cluster"].ca_file).parent, tmp_path / "certs")
    address = tls_cluster.scheduler_address
    assert address.startswith("tls://127.0.0.1:")
    before = scheduled_tasks(tls_cluster)
    result = runner.invoke(app, ["release", str(write_release_spec(tmp_path, address, cluster_files))])
    assert result.exit_code == 0, result.output
    assert "published 1080 records" in result.output
    assert len(pd.read_parquet(tmp_path / "release" / "masked")) == 1080
    assert scheduled_tasks(tls_cluster) > before  # the work ran on the TLS cluster


def test_evaluate_runs_over_tls_with_the_cli_options(tls_cluster, certificates, census_pair):
    result = runner.invoke(app, evaluate_args(census_pair, tls_cluster.scheduler_address)
                           + tls_options(certificates["cluster"]))
    assert result.exit_code == 0, result.output
    assert '"IL"' in result.output


def test_dask_config_supplies_the_certificates_when_no_option_does(tls_cluster, certificates):
    files = certificates["cluster"]
    with dask.config.set({"distributed.comm.tls.ca-file": files.ca_file,
                          "distributed.comm.tls.client.cert": files.cert,
                          "distributed.comm.tls.client.key": files.key}):
        with dask_client(tls_cluster.scheduler_address) as client:
            assert client.submit(sum, [1, 2]).result() == 3


def test_a_client_without_certificates_is_refused_naming_the_address(tls_cluster, census_pair):
    address = tls_cluster.scheduler_address
    result = runner.invoke(app, evaluate_args(census_pair, address))
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and address in result.output
    assert "Traceback" not in result.output


def test_a_release_without_certificates_is_refused_before_it_writes(prefect_harness, tls_cluster, tmp_path):
    address = tls_cluster.scheduler_address
    result = runner.invoke(app, ["release", str(bundled_path("demo.yaml")), "--out", str(tmp_path / "out"),
                                 "--dask-address", address])
    assert result.exit_code == 2
    # the last line: a CLI release before this one in the process leaves Prefect's log handler on its closed output
    assert result.output.strip().splitlines()[-1].startswith(f"error: spec field 'dask': the Dask scheduler {address} "
                                                             "uses TLS")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["certificates of another CA", "tcp:// to a TLS scheduler"])
def test_a_connection_the_scheduler_refuses_is_one_error_line_naming_the_address(tls_cluster, certificates,
                                                                                 census_pair, case):
    address = tls_cluster.scheduler_address
    if case == "certificates of another CA":
        args = evaluate_args(census_pair, address) + tls_options(certificates["other"])
    else:
        address = address.replace("tls://", "tcp://")
        args = evaluate_args(census_pair, address)
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: could not connect to the Dask scheduler at {address}")
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("dask_section,message", [
    ({"address": "tls://10.0.0.5:8786"}, r"the Dask scheduler tls://10.0.0.5:8786 uses TLS but no certificates"),
    ({"address": "tcp://10.0.0.5:8786", "tls": {"ca_file": "a", "cert": "b", "key": "c"}},
     r"dask.tls \(--tls-ca-file, --tls-cert, --tls-key\) is for a tls:// scheduler address, but dask.address "
     r"\(--dask-address\) is the scheduler address tcp://10.0.0.5:8786"),
    ({"tls": {"ca_file": "a", "cert": "b", "key": "c"}}, r"dask.tls .* is the local cluster \(no dask.address\)"),
    ({"address": "tls://10.0.0.5:8786", "tls": {"ca_file": "a", "key": "c"}}, r"dask.tls.cert \(--tls-cert\) is "
     r"missing"),
])
def test_tls_settings_that_disagree_with_the_address_are_refused_naming_the_field(dask_section, message):
    data = yaml.safe_load(bundled_path("demo.yaml").read_text())
    with pytest.raises(SpecError, match=r"spec field 'dask': " + message):
        parse_spec({**data, "dask": dask_section}, base_dir=bundled_path("demo.yaml").parent)


def test_a_missing_certificate_file_is_named(certificates, tmp_path):
    files = certificates["cluster"]
    with pytest.raises(InputError, match=r"dask.tls.key \(--tls-key\): file not found: .*absent.pem"):
        client_security("tls://127.0.0.1:8786", TlsFiles(files.ca_file, files.cert, str(tmp_path / "absent.pem")))


def test_spec_tls_files_resolve_against_the_spec_and_cli_files_replace_them(tmp_path):
    spec_path = write_release_spec(tmp_path, "tls://10.0.0.5:8786", tmp_path / "certs")
    spec = load_spec(spec_path, {"dask.tls.key": "/etc/sdc/client.key"})
    assert spec.dask_tls == TlsFiles(str(tmp_path / "certs" / "ca.pem"), str(tmp_path / "certs" / "cert.pem"),
                                     "/etc/sdc/client.key")
    assert "tls" not in load_spec(bundled_path("demo.yaml")).model_dump()["dask"]  # spec hashes stay as they were


def listening_sockets() -> set[tuple[str, int]]:
    """(host, port) of every socket this process and its children listen on."""
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    return {tuple(c.laddr) for p in processes for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN}


def test_the_local_cluster_listens_on_loopback_only():
    before = listening_sockets()
    with dask_client(workers=1) as client:
        addresses = [client.scheduler.address, *client.scheduler_info()["workers"]]
        opened = listening_sockets() - before
    assert all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses
    assert len(opened) >= 3  # the scheduler (comm and HTTP), the nanny and the worker
    assert {host for host, _ in opened} == {"127.0.0.1"}, opened
