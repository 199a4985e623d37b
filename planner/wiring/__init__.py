"""Adapters the command line needs, wired without the service.

One module per adapter, so that a command loads only the adapter it uses (an import-linter
contract checks it, indirect imports included): ``planner.wiring.traces`` (``planner
stragglers``), ``planner.wiring.logs`` (``planner eta replay``), ``planner.wiring.ray``
(``planner review --ray-address`` and the service's scheduled reviews),
``planner.wiring.calibration`` (``planner calibrate sample|fit``). The service's composition
root (``planner.service.main``) wires the rest; nothing here imports the web stack or the
database. This package imports nothing itself: importing it loads no adapter.
"""
