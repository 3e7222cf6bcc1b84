"""Run one release on Dask workers submitted as SLURM jobs (dask-jobqueue), from a login or batch node:

    pip install dask-jobqueue     # optional: not a dependency of sdc-pipeline
    python deploy/cluster/slurm.py SPEC.yaml --out /shared/releases/NAME --queue compute --account sdc \
        --jobs 8 --cores 16 --processes 16 --memory 64GiB --walltime 04:00:00

The scheduler runs in this process; each SLURM job starts ``--processes`` single-threaded workers. The
release connects by the scheduler's address, exactly as with ``sdc release --dask-address``; the jobs are
cancelled when the release ends. Input and output paths must be on storage every node sees at the same path.
"""

from __future__ import annotations

import argparse

from dask_jobqueue import SLURMCluster
from distributed import Client

from flows.release import release


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
    parser.add_argument("--interface", default=None, help="network interface the workers use (e.g. ib0)")
    parser.add_argument("--local-directory", default=None, help="node-local scratch for worker spill")
    parser.add_argument("--wait-timeout", type=float, default=900, help="seconds to wait for the first worker")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Start the SLURM cluster, wait for a worker, run the release through its address, then cancel the jobs."""
    args = argument_parser().parse_args(argv)
    with SLURMCluster(queue=args.queue, account=args.account, cores=args.cores, processes=args.processes,
                      memory=args.memory, walltime=args.walltime, interface=args.interface,
                      local_directory=args.local_directory) as cluster:
        cluster.scale(jobs=args.jobs)
        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=args.wait_timeout)
        release(args.spec, out_dir=args.out, dask_address=cluster.scheduler_address,
                overwrite=args.overwrite or None)


if __name__ == "__main__":
    main()
