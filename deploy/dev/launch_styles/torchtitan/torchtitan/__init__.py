"""A CPU stand-in for torchtitan's ``torchtitan.train`` module (README.md of the directory above):
run from that directory, ``python -m torchtitan.train`` finds this package."""

__version__ = "0.2.2+cpu-stand-in"
