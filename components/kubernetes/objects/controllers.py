"""The job controllers the queues admit work for: JobSet, Kubeflow Trainer v2 (TrainJob) and the MPI Operator
(MPIJob), and the one training runtime the platform ships (torch-distributed).

Kueue's integrations and the team Role name exactly these kinds (and batch Jobs, pods, Deployments, StatefulSets):
RayJob and the v1 training operator's PyTorchJob are not offered, since nothing installs their controllers (the v1
training operator's own mpijobs.kubeflow.org v1 CRD cannot coexist with the MPI Operator's v2beta1 one,
kubeflow/trainer#1930).
"""

from __future__ import annotations

from components.kubernetes.objects.common import Manifest, meta

JOBSET_NAMESPACE = "jobset-system"
TRAINER_NAMESPACE = "kubeflow-system"
TORCH_RUNTIME = "torch-distributed"
# The Kueue frameworks (Kueue v0.19.2 pkg/controller/jobs FrameworkName constants) whose controllers the platform runs.
KUEUE_FRAMEWORKS = ("batch/job", "kubeflow.org/mpijob", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob",
                    "pod", "deployment", "statefulset")


def jobset_values(version: str) -> Manifest:
    """JobSet's chart values: the released image, as the published chart sets it (kubernetes-sigs/jobset
    hack/helm-chart-package.sh rewrites image.repository to registry.k8s.io/jobset/jobset and the tag to the release),
    written out so the graph shows what runs; two controller replicas for upgrades without a gap."""
    return {"image": {"repository": "registry.k8s.io/jobset/jobset", "tag": version, "pullPolicy": "IfNotPresent"},
            "controller": {"replicas": 2}}


def trainer_values() -> Manifest:
    """Kubeflow Trainer's chart values: JobSet is installed on its own (its chart would install a second controller
    and webhook otherwise: values.yaml ``jobset.install``, "must be set to false if jobset controller/webhook has
    already been installed"), and none of the chart's runtimes, whose installer Job downloads kubectl at run time;
    the platform creates the torch-distributed runtime itself."""
    return {"jobset": {"install": False}, "runtimes": {"defaultEnabled": False}}


def torch_runtime(image: str) -> Manifest:
    """The torch-distributed ClusterTrainingRuntime TrainJobs name (``runtimeRef: {name: torch-distributed}``): one
    replicated job of ``numNodes`` pods running torchrun, the shape of Kubeflow Trainer v2.3.0's built-in runtime
    (charts/kubeflow-trainer/files/runtimes/torch-distributed.yaml), with an image from an allowed registry (a
    TrainJob's ``trainer.image`` overrides it)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": meta(TORCH_RUNTIME, labels={"trainer.kubeflow.org/framework": "torch"}),
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}},
                },
            }]}},
        },
    }
