"""``blueprint admit``: would this job run on the cluster this stack builds, and if not, why.

It reads only the ResourceGraph (the Kubernetes objects, Helm releases, node groups and identities the program
registers) and the instance catalogs, never a second model of the cluster, and walks each workload through it in
the order the cluster would: schema, namespace, Pod Security, admission policies, LimitRange and ResourceQuota,
Kueue, scheduling, volumes, identity, network (:mod:`blueprint.admit.engine`).

An sbatch script is walked through the cluster's Slurm instead (:mod:`blueprint.admit.slurmjob`: partition,
account, time, nodes, GPUs against slurm.conf and the accounts slurmdbd loads, both read from the graph).

Entry points: :func:`blueprint.admit.workloads.load_workloads` (files to objects and sbatch scripts;
:class:`WorkloadFileError` for input that is neither), :func:`blueprint.admit.engine.admit_workloads` (the verdicts) and
:mod:`blueprint.admit.render` (text and JSON). This package module imports nothing, so that the CLI's error handling
can name :class:`~blueprint.admit.workloads.WorkloadFileError` without loading the CEL and schema libraries.
"""
