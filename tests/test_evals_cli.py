"""``sa eval``: run, exit codes, case from-thread, rescore, compare and list, offline."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from sa_core.cli import main
from sa_core.runtime import Runtime
from sa_core.server.testing import signed_in_client
from tests.evals_kit import offline_provider, shop_pack

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(tmp_path: Path, sa_database_url: str) -> list[str]:
    """The options every command gets: the test's database and the shop pack."""
    module = tmp_path / "shop_cli_pack.py"
    module.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.evals_kit import shop_pack\npack = shop_pack()\n"
    )
    return ["--db", sa_database_url, "--pack", str(module)]


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "suite": "cli",
                "target": "shop/desk",
                "trials": 2,
                "cases": [
                    {
                        "id": "hello",
                        "input": "hi",
                        "expect": {
                            "final": {"contains": "Test response received"},
                            "tools": {"match": "exact", "calls": []},
                            "status": "completed",
                        },
                    }
                ],
            }
        )
    )
    return path


def test_run_writes_outputs_and_exits_by_the_gate(
    cli: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _suite(tmp_path)
    out, junit = tmp_path / "run.json", tmp_path / "junit.xml"
    args = ["eval", "run", str(suite), *cli, "--test-provider", "--cache", "replay-or-record"]
    assert main([*args, "-o", str(out), "-o", str(junit), "--gate", "pass_at_1>=0.9"]) == 0
    captured = capsys.readouterr()
    assert "hello" in captured.out and "2/2 trials" in captured.err
    run = json.loads(out.read_text())
    assert run["format"] == "sa-eval-run" and run["summary"]["pass_at_1"] == 1.0
    assert len(ET.parse(junit).getroot().findall("./testsuite/testcase")) == 2
    assert main([*args, "--gate", "pass_at_1>=0.9,cost_usd>1"]) == 1
    assert "gate failed: cost_usd is 0, gate wants >1" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                "run",
                str(suite),
                *cli,
                "--test-provider",
                "--cache",
                "replay",
                "--baseline",
                run["run_id"],
            ]
        )
        == 0
    )
    assert main(["eval", "list", *cli]) == 0
    listed = capsys.readouterr().out
    assert run["run_id"] in listed and "cli" in listed
    assert main(["eval", "compare", run["run_id"], str(out), *cli]) == 0
    assert "regressions: none" in capsys.readouterr().out
    assert main(["eval", "rescore", run["run_id"], *cli, "--gate", "pass_at_1>=1"]) == 0


def test_exit_codes_for_a_bad_suite_and_a_replay_miss(
    cli: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: x\ntarget: shop/desk\ncases: [{id: a, expect: {final: {nope: 1}}}]\n")
    assert main(["eval", "run", str(bad), *cli, "--test-provider"]) == 2
    assert "case 'a' field expect.final.nope" in capsys.readouterr().err
    suite = _suite(tmp_path)
    assert main(["eval", "run", str(suite), *cli, "--test-provider", "--cache", "replay"]) == 3
    assert main(["eval", "run", str(suite), *cli, "--gate", "bogus"]) == 2


def test_a_case_from_a_server_thread_replays_its_path_and_scores_its_trajectory(
    cli: list[str], tmp_path: Path, sa_database_url: str
) -> None:
    runtime = Runtime(
        packs=[shop_pack()],
        providers={"test": offline_provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    base = "/api/packages/shop/threads"
    with signed_in_client(runtime) as client:
        thread_id = client.post(base, json={"agent": "desk"}).json()["id"]
        posted = client.post(
            f"{base}/{thread_id}/messages", json={"content": "My kettle arrived broken, order 4411"}
        )
        assert posted.status_code == 202, posted.text
        client.blocking_portal.call(runtime.wait_idle, 30)
    case_file = tmp_path / "case.yaml"
    assert main(["eval", "case", "from-thread", thread_id, "-o", str(case_file), *cli]) == 0
    document = yaml.safe_load(case_file.read_text())
    (case,) = document["cases"]
    assert case["from_thread"]["id"] == thread_id
    assert case["expect"]["tools"]["calls"] == [
        {"lookup_order": {"order_id": "4411"}},
        {"checker": {"summary": "refund order 4411"}},
        {"issue_refund": {"order_id": "4411"}},
    ]
    out = tmp_path / "run.json"
    code = main(["eval", "run", str(case_file), *cli, "--test-provider", "-o", str(out)])
    assert code == 0
    (trial,) = json.loads(out.read_text())["trials"]
    tools = next(s for s in trial["scores"] if s["name"] == "tools")
    assert tools["passed"] and tools["score"] == 1.0 and trial["score"] == 1.0
