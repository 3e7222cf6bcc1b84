"""The TLS settings of a client of a ``tls://`` Dask scheduler (the files, and the checks that the address and
the files agree); light, so that a spec is checked before Dask's distributed package is imported."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sdc_tasks.errors import InputError

TLS_SETTINGS = {"ca_file": "dask.tls.ca_file (--tls-ca-file)", "cert": "dask.tls.cert (--tls-cert)",
                "key": "dask.tls.key (--tls-key)"}
DASK_TLS_CONFIG = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert")

@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """The client's TLS files for a ``tls://`` scheduler: the CA certificate that signed the cluster's
    certificates, and the client's certificate and private key (PEM files)."""

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None

    def given(self) -> bool:
        """Whether any of the three files is named."""
        return any(dataclasses.astuple(self))

    def resolved(self) -> "TlsFiles":
        """The same files, relative paths resolved against the working directory."""
        return TlsFiles(*(path if path is None else str(Path(path).resolve()) for path in dataclasses.astuple(self)))


def is_tls(address: str | None) -> bool:
    """Whether a scheduler address uses the ``tls://`` protocol."""
    return bool(address) and address.lower().startswith("tls://")


def dask_config_has_tls() -> bool:
    """Whether Dask's own config (``distributed.comm.tls.*``, or its DASK_DISTRIBUTED__COMM__TLS__* environment
    variables) names a CA file and a client certificate."""
    from dask import config  # imported here: a run without tls:// never needs it, and start-up stays light

    return all(config.get(key, None) for key in DASK_TLS_CONFIG)


def check_tls_settings(address: str | None, tls: TlsFiles) -> None:
    """Raise InputError, naming the setting, when the scheduler address and the TLS files disagree: TLS files
    without a ``tls://`` address, a ``tls://`` address with some but not all three files, or with none and no
    TLS in Dask's config."""
    options = "dask.tls (--tls-ca-file, --tls-cert, --tls-key)"
    if tls.given() and not is_tls(address):
        where = f"the scheduler address {address}" if address else "the local cluster (no dask.address)"
        raise InputError(f"{options} is for a tls:// scheduler address, but dask.address (--dask-address) is "
                         f"{where}: use tls://host:port, or drop the TLS files")
    missing = [name for field, name in TLS_SETTINGS.items() if getattr(tls, field) is None]
    if tls.given() and missing:
        raise InputError(f"{missing[0]} is missing: a tls:// scheduler needs all of {options}")
    if is_tls(address) and not tls.given() and not dask_config_has_tls():
        raise InputError(f"the Dask scheduler {address} uses TLS but no certificates are given: set {options}, "
                         "or Dask's distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key")
