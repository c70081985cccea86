"""What each side is sent of one trial: a worker's share as its task's argument (TrialSpec),
built from the run's options and the trial's plan."""

from __future__ import annotations

from coordinator.config import LaunchConfig
from coordinator.trials.plan import ExpiryMode, TrialPlan, WorkerShare
from model.wire import TrialSpec


def worker_spec(config: LaunchConfig, run_id: str, plan: TrialPlan, share: WorkerShare,
                offset_ns: int, workers: int, span_s: float, products: int) -> TrialSpec:
    """One worker's share of ``plan`` (its clients, its clock offset; the HTTP target when the
    trial is an HTTP trial)."""
    return TrialSpec(
        run_id=run_id, trial=plan.trial, repeat=plan.repeat,
        strategy=plan.strategy.name, params=dict(plan.strategy.params),
        worker_index=share.index, client_base=share.client_base, clients=share.clients,
        keys=list(plan.keys), ttl_ms=plan.ttl_ms, start_ns=plan.start_ns,
        end_ns=plan.end_ns, clock_offset_ns=offset_ns,
        pool_size=config.pool_size, origin_span_s=span_s,
        progress_interval_s=config.timing.progress_s,
        workload=config.workload.to_json(), stage_start_ns=plan.window_start_ns,
        workers=workers, products=products,
        expiry_grid_ns=plan.first_expiry_ns if config.expiry is ExpiryMode.ALIGNED else 0,
        redis_client=config.redis_client.value, plugins=list(config.plugins),
        client_driver=config.client_driver.value,
        http=plan.http.to_json() if plan.http is not None else None,
    )
