"""The pull-request workflow: what reviewers rely on is there (actionlint checks the syntax in `make lint`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "preview.yml"


def _load() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_runs_on_pull_requests_with_the_permissions_it_uses() -> None:
    doc = _load()
    assert "pull_request" in doc[True]  # YAML 1.1 reads the key `on` as true
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write", "security-events": "write",
                                  "id-token": "write"}


def test_offline_job_tests_then_comments_policy_and_cost_diff_and_uploads_sarif() -> None:
    job = _load()["jobs"]["offline"]
    runs = _runs(job)
    assert runs.index("make test") < runs.index("blueprint graph")
    assert "blueprint policy \"out/$stack.json\" --format markdown" in runs
    # A failing stack's verdict (exit 1, as preview and policy now exit) is still posted: the comment step goes on.
    assert "blueprint policy \"out/$stack.json\" --format markdown || true" in runs
    assert "blueprint preview" not in runs
    assert "blueprint cost diff --base \"$BASE_REF\" \"$stack\"" in runs
    assert job["steps"][0]["with"]["fetch-depth"] == 0  # the base branch must be there to build it
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    script = next(s["with"]["script"] for s in job["steps"] if s.get("uses", "").startswith("actions/github-script@"))
    assert "updateComment" in script and "createComment" in script  # one comment, updated on each push
    assert runs.rstrip().endswith('for graph in out/*.json; do .venv/bin/blueprint policy "$graph"; done')


def test_real_preview_runs_only_with_a_pulumi_token_and_the_policy_pack() -> None:
    job = _load()["jobs"]["pulumi-preview"]
    assert job["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    # Every step needs the token; cloud credentials are taken for the stack's own cloud only.
    assert all(str(step.get("if", "")).startswith("env.PULUMI_ACCESS_TOKEN != ''") for step in job["steps"])
    creds = {s["uses"].split("@")[0]: s["if"] for s in job["steps"] if "credentials" in s.get("name", "")}
    assert creds == {"aws-actions/configure-aws-credentials": "env.PULUMI_ACCESS_TOKEN != '' && "
                     "endsWith(matrix.stack, '-aws')",
                     "google-github-actions/auth": "env.PULUMI_ACCESS_TOKEN != '' && endsWith(matrix.stack, '-gcp')"}
    preview = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert preview["with"]["command"] == "preview" and preview["with"]["policyPacks"] == "policies"
    stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                    for p in (WORKFLOW.parents[2] / "stacks").glob("Pulumi.*.yaml"))
    assert sorted(job["strategy"]["matrix"]["stack"]) == stacks
