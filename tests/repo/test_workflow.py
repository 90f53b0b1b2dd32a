"""The pull-request workflow: what reviewers rely on is there (actionlint checks the syntax in `make lint`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "preview.yml"


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


def test_tests_run_on_their_own() -> None:
    assert "make test" in _runs(_load()["jobs"]["tests"])


def test_ci_checks_the_docs_and_that_the_readme_picture_is_not_stale() -> None:
    """Issue 36: the workflow's tests job and .ci/run both run `make docs-check`, which builds the site and compares
    the report's text with the one committed beside the README's picture (tools/report_picture.py)."""
    root = WORKFLOW.parents[2]
    assert "make docs-check" in _runs(_load()["jobs"]["tests"])
    assert "\nmake docs-check\n" in (root / ".ci" / "run").read_text()
    makefile = (root / "Makefile").read_text()
    target = makefile[makefile.index("\ndocs-check: docs\n"):].split("\n\n")[0]
    assert "GPU_CLUSTER_NOW=$(PICTURE_NOW) $(BIN)/blueprint report prod-aws" in target
    assert "tools/report_picture.py check build/report-prod-aws.check.html docs/img/report-prod-aws.txt" in target
    screenshot = makefile[makefile.index("\nscreenshot: setup\n"):].split("\n\n")[0]
    assert "tools/report_picture.py write build/report-prod-aws.html docs/img/report-prod-aws.txt" in screenshot


def test_each_stack_is_checked_in_its_own_parallel_job() -> None:
    """A matrix job per stack (listed from the stack files) builds its graph, its SARIF with lines in its stack file,
    its Markdown verdict and its cost change as JSON; a mandatory violation is recorded, not fatal there."""
    jobs = _load()["jobs"]
    assert "stacks/Pulumi.*.yaml" in _runs(jobs["stacks"])
    job = jobs["stack"]
    assert job["needs"] == "stacks"
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert job["strategy"]["fail-fast"] is False
    runs = _runs(job)
    assert runs.index("blueprint graph") < runs.index("blueprint policy")
    assert '--stack-file "stacks/Pulumi.$STACK.yaml" --format sarif' in runs
    assert '.venv/bin/blueprint policy "out/$STACK.json" --format markdown -o "out/$STACK.policy.md" || true' in runs
    assert 'blueprint cost diff --base "$BASE_REF" "$STACK" --format json -o "out/$STACK.cost.json"' in runs
    assert "|| status=$?" in runs and 'echo "$status" > "out/$STACK.status"' in runs
    # cost diff exits 1 on a replaced filesystem, bucket, cluster or KMS key, or a refused version step: recorded for
    # the gate (the JSON still reaches the comment), not lost to `set -e`, and any other exit stays an error.
    assert "|| cost=$?" in runs and 'echo "$cost" > "out/$STACK.cost.status"' in runs
    assert 'if [ "$cost" -gt 1 ]; then exit "$cost"; fi' in runs
    assert job["steps"][0]["with"]["fetch-depth"] == 0  # the base branch must be there to build it
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "stack-${{ matrix.stack }}" and upload["if"] == "always()"
    # Each stack uploads its own SARIF under its own category: GitHub takes at most 20 runs per upload.
    sarif = next(s for s in job["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert sarif["with"] == {"sarif_file": "out/${{ matrix.stack }}.sarif",
                             "category": "gpu-cluster-policies/${{ matrix.stack }}"}
    assert sarif["if"] == "always()"


def test_one_job_gathers_the_comment_and_the_gate() -> None:
    job = _load()["jobs"]["comment"]
    assert job["needs"] == ["stack", "pulumi-preview"] and "always()" in job["if"]
    runs = _runs(job)
    assert "blueprint cost diff --combine out/*.cost.json" in runs  # one summary table across stacks, first
    assert runs.index("cost diff --combine") < runs.index("out/*.policy.md")
    assert 'for f in out/*.policy.md; do cat "$f"; echo; done' in runs  # a blank line between the verdicts
    assert "out/*.real.md" in runs  # the real preview's verdict and cost, when a token ran it
    download = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {"pattern": "*-*", "merge-multiple": True, "path": "out"}
    script_step = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/github-script@"))
    assert "updateComment" in script_step["with"]["script"] and "createComment" in script_step["with"]["script"]
    assert script_step["continue-on-error"] is True  # a fork cannot comment; the gate still runs
    gate = job["steps"][-1]
    assert gate["name"] == "Fail on a mandatory policy violation or a refused day-two change"
    assert gate["if"] == "always()"
    assert 'for f in out/*.status' in gate["run"]  # matches <stack>.status and <stack>.cost.status


def test_real_preview_runs_only_with_a_pulumi_token_and_the_policy_pack() -> None:
    job = _load()["jobs"]["pulumi-preview"]
    assert job["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    # Every step needs the token; cloud credentials are taken for the stack's own cloud only.
    assert all(str(step.get("if", "")).startswith("env.PULUMI_ACCESS_TOKEN != ''") for step in job["steps"])
    creds = {s["uses"].split("@")[0]: s["if"] for s in job["steps"] if "credentials" in s.get("name", "")}
    assert creds == {"aws-actions/configure-aws-credentials": "env.PULUMI_ACCESS_TOKEN != '' && "
                     "endsWith(matrix.stack, '-aws')",
                     "google-github-actions/auth": "env.PULUMI_ACCESS_TOKEN != '' && endsWith(matrix.stack, '-gcp')"}
    install = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert "with" not in install  # the CLI only; the preview runs below with the event log
    preview = next(s for s in job["steps"] if s.get("id") == "preview")
    assert preview["env"]["PULUMI_DEBUG_COMMANDS"] == "true"  # --event-log is registered only with it
    assert '--policy-pack policies' in preview["run"] and '--event-log "out/$STACK.events.jsonl"' in preview["run"]
    readers = next(s["run"] for s in job["steps"] if s.get("name") == "Policy verdict and cost change of the real "
                   "preview")
    assert 'blueprint policy "$log"' in readers and 'blueprint cost diff --event-log "$log"' in readers
    assert job["steps"][-1]["run"] == 'exit "${{ steps.preview.outputs.status }}"'

    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"  # every stack file


@pytest.mark.parametrize(("policy", "cost", "fails"), [("0", "0", False), ("1", "0", True), ("0", "1", True)])
def test_the_gate_fails_on_a_policy_violation_or_a_day_two_failure(tmp_path: Path, policy: str, cost: str,
                                                                   fails: bool) -> None:
    """The gate's own shell, run on the files the stack jobs leave: a day-two failure (cost diff exit 1) fails the
    pull request as a mandatory policy violation does."""
    gate = _load()["jobs"]["comment"]["steps"][-1]["run"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "prod-aws.status").write_text(policy + "\n")
    (tmp_path / "out" / "prod-aws.cost.status").write_text(cost + "\n")
    (tmp_path / "out" / "dev-aws.status").write_text("0\n")
    (tmp_path / "out" / "dev-aws.cost.status").write_text("0\n")
    done = subprocess.run(["bash", "-c", gate], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert (done.returncode != 0) is fails, done.stdout + done.stderr
    if fails:
        assert ("prod-aws.cost.status" if cost == "1" else "prod-aws.status") in done.stdout
