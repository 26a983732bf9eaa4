"""A cell whose run raises something that is not an InnotierError fails that cell only: the sweep goes on, the other
cell runs and is recorded, nothing is left running, and the report lists the failed cell with its error.

Real MariaDB sandboxes and the real runner; the fault is injected at the TPC-C driver call the runner makes for
one cell (``tuner.tpcc.driver.run``, the narrowest seam between the runner and the workload: everything before it,
clone, placement, start, and everything after it, clean-up and recording, is the real path)."""

from __future__ import annotations

from tuner.tpcc import driver as tpcc_driver

SPEC = """
name: cell-failure
server: {flavor: mariadb}
workload: {driver: builtin, mode: procedures, warehouses: 1, warmup: 1, duration: 5, interval: 5}
repeats: 1
order: interleave
tiers:
  disk: {kind: home}
fixed: {page_size: 16k, clients: 1, buffer_pool_size: 64M}
axes:
  doublewrite: ["ON", "OFF"]
"""


def test_a_non_innotier_exception_in_one_cell_fails_only_that_cell(tmp_path, write_spec, monkeypatch):
    from tuner.core.sandbox import SandboxState, list_sandboxes
    from tuner.sweep.plan import make_plan
    from tuner.sweep.report import build_report
    from tuner.sweep.results import ResultsStore
    from tuner.sweep.runner import Runner, RunnerOptions
    from tuner.sweep.spec import load_spec

    real_run = tpcc_driver.run
    victim = []

    def crashing_driver(spec, cfg, **kw):
        if not victim:  # the first cell the runner measures
            victim.append(cfg.labels["cell"])
            raise RuntimeError("injected: the driver crashed")
        return real_run(spec, cfg, **kw)

    monkeypatch.setattr(tpcc_driver, "run", crashing_driver)
    # other tests' session-scoped sandboxes may be running; this test answers for the ones the sweep starts
    running_before = {sb.name for sb in list_sandboxes() if sb.state() == SandboxState.RUNNING}
    plan = make_plan(load_spec(write_spec(SPEC)))
    lines: list[str] = []
    results = str(tmp_path / "results.db")
    summary = Runner(plan, RunnerOptions(results=results, listen=None, pt_summary=False, echo=lines.append,
                                         live=False, probe=False)).run()
    out = "\n".join(lines)

    assert summary.ran == 2 and len(summary.failed) == 1, out
    assert "RuntimeError: injected: the driver crashed" in summary.failed[0]
    with ResultsStore(results) as store:
        cells = {c.cell_id: c for c in store.cells(plan.run_id)}
        failed = cells[victim[0]]
        assert failed.status == "failed" and failed.failure == "RuntimeError: injected: the driver crashed"
        [ok] = [c for k, c in cells.items() if k != victim[0]]
        assert ok.status == "ok" and ok.tpmc > 0 and ok.check_ok  # the sweep went on after the failure
        rep = build_report(store, plan.run_id, tmp_path / "report")
    assert f"- {failed.label} (block 1): RuntimeError: injected: the driver crashed" in rep.markdown.read_text()
    left = [sb.name for sb in list_sandboxes() if sb.state() == SandboxState.RUNNING and sb.name not in running_before]
    assert not left, left  # the failed cell's server stopped, and the other's
