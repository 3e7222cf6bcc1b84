"""Run one release on Dask workers submitted as SLURM jobs (dask-jobqueue), from a login or batch node:

    pip install dask-jobqueue     # optional: not a dependency of sdc-pipeline
    python deploy/cluster/slurm.py SPEC.yaml --out /shared/releases/NAME --queue compute --account sdc \
        --jobs 8 --cores 16 --processes 16 --memory 64GiB --walltime 04:00:00 --interface ib0 \
        --tls-ca-file /shared/sdc/tls/ca.pem --tls-cert /shared/sdc/tls/cluster.pem \
        --tls-key /shared/sdc/tls/cluster-key.pem

The scheduler runs in this process and listens on ``--interface`` only (its dashboard on 127.0.0.1:8787:
reach it with ``ssh -L 8787:127.0.0.1:8787 login-node``); each SLURM job starts ``--processes``
single-threaded workers. Scheduler, workers and the release's client speak TLS only (tls://), each presenting
the certificate and key given, signed by the CA given, so a process without them cannot join or submit work;
the files must be on storage the nodes see, the key readable by the release's account only. The release
connects by the scheduler's address, exactly as with ``sdc release --dask-address tls://... --tls-*``; the
jobs are cancelled when the release ends. Input and output paths must be on storage every node sees at the
same path. Each job's workers run with the heap of a run's own LocalCluster (its environment exported, its trim
preloaded: ``sdc_tasks.worker_heap``; deploy/README.md, "Worker memory and spilling").
"""

from __future__ import annotations

import argparse

from dask_jobqueue import SLURMCluster
from distributed import Client
from distributed.security import Security

from flows.release import release
from sdc_tasks.worker_heap import HEAP_ENVIRONMENT


def argument_parser() -> argparse.ArgumentParser:
    """The command line: the release, then the SLURM job shape."""
    parser = argparse.ArgumentParser(description="Run a release on Dask workers started as SLURM jobs.")
    parser.add_argument("spec", help="release spec (YAML)")
    parser.add_argument("--out", default=None, help="output directory (default: the spec's output.dir)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    parser.add_argument("--queue", required=True, help="SLURM partition (#SBATCH -p)")
    parser.add_argument("--account", default=None, help="SLURM account (#SBATCH -A)")
    parser.add_argument("--jobs", type=int, default=4, help="SLURM jobs to submit")
    parser.add_argument("--cores", type=int, default=16, help="cores per job")
    parser.add_argument("--processes", type=int, default=16, help="Dask worker processes per job")
    parser.add_argument("--memory", default="64GiB", help="memory per job, shared by its workers")
    parser.add_argument("--walltime", default="04:00:00", help="wall time per job")
    parser.add_argument("--interface", required=True, help="network interface the scheduler listens on and the "
                        "workers use (e.g. ib0)")
    parser.add_argument("--tls-ca-file", required=True, help="CA certificate (PEM) that signed --tls-cert")
    parser.add_argument("--tls-cert", required=True, help="certificate (PEM) of the scheduler, workers and client")
    parser.add_argument("--tls-key", required=True, help="private key (PEM) of --tls-cert")
    parser.add_argument("--local-directory", default=None, help="node-local scratch for worker spill")
    parser.add_argument("--wait-timeout", type=float, default=900, help="seconds to wait for the first worker")
    return parser


def cluster_security(args: argparse.Namespace) -> Security:
    """TLS for every role (scheduler, workers, client) with the one certificate and key, encryption required."""
    files = {f"tls_{role}_{part}": getattr(args, f"tls_{part}")
             for role in ("scheduler", "worker", "client") for part in ("cert", "key")}
    return Security(tls_ca_file=args.tls_ca_file, require_encryption=True, **files)


def main(argv: list[str] | None = None) -> None:
    """Start the SLURM cluster, wait for a worker, run the release through its address, then cancel the jobs."""
    args = argument_parser().parse_args(argv)
    with SLURMCluster(queue=args.queue, account=args.account, cores=args.cores, processes=args.processes,
                      memory=args.memory, walltime=args.walltime, interface=args.interface,
                      local_directory=args.local_directory, protocol="tls://", security=cluster_security(args),
                      scheduler_options={"dashboard_address": "127.0.0.1:8787"},
                      job_script_prologue=[f"export {k}={v}" for k, v in HEAP_ENVIRONMENT.items()],
                      worker_extra_args=["--preload", "sdc_tasks.worker_heap"]) as cluster:
        cluster.scale(jobs=args.jobs)
        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=args.wait_timeout)
        release(args.spec, out_dir=args.out, dask_address=cluster.scheduler_address,
                overwrite=args.overwrite or None, tls_ca_file=args.tls_ca_file, tls_cert=args.tls_cert,
                tls_key=args.tls_key)


if __name__ == "__main__":
    main()
