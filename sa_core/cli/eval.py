"""``sa eval``: run suites, turn threads into cases, rescore, compare and list stored runs.

``sa eval run SUITE.yaml [--case ID] [--trials K] [--concurrency N] [--cache MODE]
[--baseline RUN_OR_FILE] [--gate EXPR] [-o run.json -o junit.xml]`` exits 0 when the run passes
(its gate, else every case passing at least half its trials with no regression), 1 when the
gate fails, 2 when the suite could not run, 3 on a cache miss under ``--cache replay``.
Runs are stored in the database ``sa serve`` uses (``--db``), where ``sa eval list``,
``sa eval rescore RUN`` and ``sa eval compare RUN_A RUN_B`` find them. See docs/evals.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sa_core.cli.offline_option import add_test_provider_option
from sa_core.cli.stored import add_store_options

if TYPE_CHECKING:
    from sa_core.evals import Report
    from sa_core.runtime import Runtime

PASSED, GATE_FAILED, COULD_NOT_RUN, CACHE_MISS = 0, 1, 2, 3


def register(subparsers: Any) -> None:
    """Add ``eval`` and its actions to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="run eval suites, make cases from threads, compare runs",
        description="Evals: run a suite file's cases as trials and score them (docs/evals.md).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = _action(actions, "run", "run a suite and report (exit 0 pass, 1 gate, 2 error, 3 miss)")
    run.add_argument("suite", metavar="SUITE", help="the suite file (YAML or JSON)")
    run.add_argument(
        "--case",
        dest="cases",
        action="append",
        default=[],
        metavar="ID",
        help="run only this case (repeatable)",
    )
    run.add_argument("--trials", type=int, default=None, metavar="K", help="trials per case")
    run.add_argument("--concurrency", type=int, default=4, metavar="N", help="trials at once")
    run.add_argument(
        "--cache", default="off", choices=["off", "record", "replay", "replay-or-record"]
    )
    run.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="use model definition MODEL for NAME (a model name, judge or user)",
    )
    _report_options(run)
    add_test_provider_option(run)
    run.set_defaults(func=run_command)
    case = actions.add_parser("case", help="make a case", description="Make a case.")
    kinds = case.add_subparsers(dest="kind", metavar="KIND", required=True)
    from_thread = _action(kinds, "from-thread", "a suite with one case replaying a thread")
    from_thread.add_argument("thread_id", metavar="THREAD_ID")
    from_thread.add_argument("--upto", metavar="MESSAGE_ID", default=None)
    from_thread.add_argument("-o", "--output", metavar="FILE", required=True)
    from_thread.set_defaults(func=case_command)
    rescore = _action(actions, "rescore", "score a stored run again (the agent does not run)")
    rescore.add_argument("run_id", metavar="RUN")
    rescore.add_argument("--scorer", dest="scorers", action="append", default=[], metavar="NAME")
    _report_options(rescore)
    rescore.set_defaults(func=rescore_command)
    compare = _action(actions, "compare", "compare run B with run A, case by case")
    compare.add_argument("run_a", metavar="RUN_A", help="the baseline: a run id or run JSON")
    compare.add_argument("run_b", metavar="RUN_B", help="the run compared: a run id or run JSON")
    compare.set_defaults(func=compare_command)
    listing = _action(actions, "list", "list stored runs, newest first")
    listing.add_argument("--suite", default=None, help="only runs of this suite")
    listing.add_argument("--limit", type=int, default=20)
    listing.set_defaults(func=list_command)


def _action(actions: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
    add_store_options(sub)
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return sub


def _report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", default=None, metavar="RUN_OR_FILE")
    parser.add_argument(
        "--gate", default=None, metavar="EXPR", help='e.g. "pass_at_1>=0.9,regressions=0"'
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="outputs",
        action="append",
        default=[],
        metavar="FILE",
        help="write run.json (or junit .xml); repeatable",
    )


@asynccontextmanager
async def eval_runtime(args: argparse.Namespace, *, work: bool = True) -> AsyncIterator[Runtime]:
    """A runtime on ``--db`` with the installed packs and ``--pack``s (offline if asked)."""
    from sa_core.packloader import load_packs_from
    from sa_core.runtime import Runtime

    packs = [pack for target in args.packs for pack in load_packs_from(target)]
    offline = getattr(args, "test_provider", False)
    async with Runtime(packs=packs, database_url=args.db, offline=offline, work=work) as rt:
        yield rt


class ProgressBar:
    """``[#####.....] 12/30 trials`` on stderr, redrawn as trials finish."""

    def __init__(self, width: int = 30) -> None:
        self.width = width

    def __call__(self, done: int, total: int) -> None:
        """Redraw for ``done`` of ``total`` trials (a newline once all are done)."""
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if done == total else ""
        print(f"\r[{bar}] {done}/{total} trials", end=end, file=sys.stderr, flush=True)


def _finish(report: Report, args: argparse.Namespace) -> int:
    """Print, write the outputs, apply the gate: the exit code."""
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        report.print()
    for output in args.outputs:
        print(f"wrote {report.write(output)}", file=sys.stderr)
    if any(t.cache_miss for t in report.trials) and report.meta.get("cache") == "replay":
        print("error: cache misses under --cache replay", file=sys.stderr)
        return CACHE_MISS
    if args.gate:
        gate = report.gate(args.gate)
        for failure in gate.failures:
            print(f"gate failed: {failure}", file=sys.stderr)
        return PASSED if gate else GATE_FAILED
    return PASSED if report.passed else GATE_FAILED


def _models(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, sep, model = pair.partition("=")
        if not sep or not name or not model:
            raise ValueError(f"--model takes NAME=MODEL, not {pair!r}")
        found[name] = model
    return found


async def run_command(args: argparse.Namespace) -> int:
    """``sa eval run``."""
    from sa_core.evals import Suite, run_suite

    try:
        suite = Suite.load(args.suite)
        if args.gate:  # a gate that cannot be read fails before any trial runs
            from sa_core.evals.report import Report

            Report("-", suite.suite, suite.target, []).gate(args.gate)
        async with eval_runtime(args) as rt:
            report = await run_suite(
                suite,
                runtime=rt,
                trials=args.trials,
                concurrency=args.concurrency,
                models=_models(args.models),
                cache=args.cache,
                baseline=args.baseline,
                cases=args.cases or None,
                progress=None if args.json else ProgressBar(),
            )
    except Exception as exc:  # a bad suite, target, model or database: exit 2
        print(f"error: could not run {args.suite}: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    return _finish(report, args)


async def case_command(args: argparse.Namespace) -> int:
    """``sa eval case from-thread``."""
    from pathlib import Path

    from sa_core.evals.fromthread import case_from_thread

    try:
        async with eval_runtime(args, work=False) as rt:
            document = await case_from_thread(rt, args.thread_id, args.upto)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    target = Path(args.output)
    if target.suffix == ".json":
        target.write_text(json.dumps(document, indent=2), encoding="utf-8")
    else:
        import importlib

        yaml: Any = importlib.import_module("yaml")
        target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    print(f"wrote {target} (case {document['cases'][0]['id']})", file=sys.stderr)
    return PASSED


async def rescore_command(args: argparse.Namespace) -> int:
    """``sa eval rescore RUN``."""
    from sa_core.evals import load_run
    from sa_core.evals.compare import compare
    from sa_core.evals.storedrun import baseline_report

    try:
        async with eval_runtime(args) as rt:
            report = await load_run(rt, args.run_id).rescore(args.scorers)
            if args.baseline:
                base = await baseline_report(rt, args.baseline)
                report.comparison = compare(base.run_id, base.cases, report.cases)
    except Exception as exc:
        print(f"error: could not rescore {args.run_id}: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    return _finish(report, args)


async def compare_command(args: argparse.Namespace) -> int:
    """``sa eval compare RUN_A RUN_B``: exit 1 when B regressed against A."""
    from sa_core.evals.compare import compare
    from sa_core.evals.storedrun import baseline_report

    try:
        async with eval_runtime(args, work=False) as rt:
            before = await baseline_report(rt, args.run_a)
            after = await baseline_report(rt, args.run_b)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    result = compare(before.run_id, before.cases, after.cases)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        rates = {c.case_id: c.pass_rate for c in before.cases}
        print(f"{after.run_id} vs {before.run_id}")
        for case in after.cases:
            was = rates.get(case.case_id)
            shown = "new" if was is None else f"{was:.2f}"
            print(f"  {case.case_id}: {shown} -> {case.pass_rate:.2f}")
        for name in ("regressions", "improvements", "flaky", "added", "removed"):
            print(f"{name}: {', '.join(getattr(result, name)) or 'none'}")
    return GATE_FAILED if result.regressions else PASSED


async def list_command(args: argparse.Namespace) -> int:
    """``sa eval list``."""
    async with eval_runtime(args, work=False) as rt:
        runs, total = await rt.store.list_eval_runs(suite=args.suite, limit=args.limit)
    if args.json:
        print(json.dumps({"runs": runs, "total": total}, indent=2))
        return PASSED
    print(f"{'run':<22} {'suite':<24} {'status':<9} {'trials':>6} {'pass@1':>6}")
    for run in runs:
        metrics = (run.get("summary") or {}).get("metrics") or {}
        print(
            f"{run['id']:<22} {run['suite']:<24} {run['status']:<9} "
            f"{int(metrics.get('trials', 0)):>6} {metrics.get('pass_at_1', 0.0):>6.2f}"
        )
    print(f"{total} run(s)", file=sys.stderr)
    return PASSED
