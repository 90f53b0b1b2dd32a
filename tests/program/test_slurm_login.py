"""Slurm's login pods (issue 38): unprivileged (only enroot on the login pod needs privilege, and containers run on
the compute nodes), SSH keys from the directory through sssd, and passwords off unless the stack allows them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from blueprint.graph.engine import run_program
from tests.conftest import offline_run, stack

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
STACKS = ["prod-aws-slurm", "dev-gcp-slurm"]


def loginset(graph: Any) -> dict[str, Any]:
    (login,) = [r for r in graph.resources if r.type == SLINKY + "LoginSet"]
    return dict(login.inputs["spec"])


@pytest.mark.parametrize("name", STACKS)
def test_login_pods_are_unprivileged(name: str) -> None:
    context = loginset(offline_run(name).graph)["login"]["securityContext"]
    assert context["privileged"] is False
    assert context.get("capabilities", {}).get("add") == ["SYS_CHROOT"]


@pytest.mark.parametrize("name", STACKS)
def test_ssh_keys_come_from_the_directory_and_passwords_are_off(name: str) -> None:
    lines = loginset(offline_run(name).graph)["extraSshdConfig"].splitlines()
    assert "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys" in lines
    assert "AuthorizedKeysCommandUser nobody" in lines
    assert "PasswordAuthentication no" in lines and "KbdInteractiveAuthentication no" in lines
    # only the directory's keys for users (a key file in a shared home is no way in); root keeps its mounted keys, in
    # a Match block that must come last
    assert "AuthorizedKeysFile none" in lines
    assert lines[-2:] == ["Match User root", "  AuthorizedKeysFile .ssh/authorized_keys"]


@pytest.mark.parametrize("name", STACKS)
def test_login_pods_make_each_slurm_users_home(name: str) -> None:
    spec = stack(name).spec.scheduler.slurm
    assert spec is not None
    script = loginset(offline_run(name).graph)["login"]["lifecycle"]["postStart"]["exec"]["command"][-1]
    users = sorted({u for names in spec.users.values() for u in names})
    assert f"for user in {' '.join(users)}; do" in script
    assert '/usr/sbin/mkhomedir_helper "$user" 0077' in script and script.rstrip().endswith("exit 0")


def test_a_stack_may_allow_passwords() -> None:
    sf = stack("dev-gcp-slurm")
    config = copy.deepcopy(sf.config)
    config["gpu-cluster:spec"]["scheduler"]["slurm"]["login"]["passwordLogin"] = True
    lines = loginset(run_program(sf.name, config, sf.region).graph)["extraSshdConfig"].splitlines()
    assert "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys" in lines
    assert not any(line.startswith(("PasswordAuthentication", "KbdInteractiveAuthentication")) for line in lines)
