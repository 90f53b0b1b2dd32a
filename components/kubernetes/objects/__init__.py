"""Kubernetes objects and Helm values of the platform, as plain manifests (dicts), one module per group.

Pure functions: the components turn these into Pulumi resources, the tests validate them offline
(built-in kinds with kubernetes-validate, custom kinds against the CRD schemas in blueprint/schemas/crds), and
``blueprint manifests`` writes the same objects for review and GitOps. Importers use this package's names
(``from components.kubernetes import objects as obj``); the modules are its sections.
"""

from components.kubernetes.objects.acceptance import *  # noqa: F403
from components.kubernetes.objects.alerting import *  # noqa: F403
from components.kubernetes.objects.common import *  # noqa: F403
from components.kubernetes.objects.controllers import *  # noqa: F403
from components.kubernetes.objects.egress import *  # noqa: F403
from components.kubernetes.objects.gpu_stack import *  # noqa: F403
from components.kubernetes.objects.gpudirect import *  # noqa: F403
from components.kubernetes.objects.jobs import *  # noqa: F403
from components.kubernetes.objects.kueue import *  # noqa: F403
from components.kubernetes.objects.slurm import *  # noqa: F403
from components.kubernetes.objects.slurm_secrets import *  # noqa: F403
from components.kubernetes.objects.storage import *  # noqa: F403
from components.kubernetes.objects.telemetry import *  # noqa: F403
from components.kubernetes.objects.tenancy import *  # noqa: F403
