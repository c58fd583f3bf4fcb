"""Visualisations of the parallel decoders (not imported by ``--user-dir``: matplotlib
is loaded only by the commands that plot).

- ``python -m fairseq_plugins.viz.trace``: the draft/verify trace of any speculative
  decoder, per iteration (SpecDec paper, Table 19), as text and HTML.
- ``python -m fairseq_plugins.viz.ddgviz``: the DDGviz grid of Jacobi iterations x target
  positions (Santilli et al. 2023, Figure 4), as PNG and SVG.
"""
