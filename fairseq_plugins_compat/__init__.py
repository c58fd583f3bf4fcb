"""Shims that make fairseq 0.12.2 work on Python >= 3.11 and torch >= 2.1.

They are activated at interpreter start by ``fairseq_plugins_compat.pth`` (installed
into site-packages by ``setup.py``), so the stock console scripts work with and without
``--user-dir fairseq_plugins``.  Importing this package activates them too.
"""
from fairseq_plugins_compat import startup

startup.install()
