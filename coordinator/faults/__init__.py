"""Faults: ``spec`` parses and checks them, ``injector`` applies them to the embedded stack's
processes, ``origin_holds`` holds the origin database (a table lock, pools run dry)."""

from coordinator.faults.spec import Action, Fault, FaultError, Target, check, label, parse

__all__ = ["Action", "Fault", "FaultError", "Target", "check", "label", "parse"]
