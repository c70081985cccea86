"""One trial's own path: its plan, the dispatch to the workers, the rows gathered as they
arrive, the workers' liveness, priming, clocks, the runner and what it writes of the trial."""
