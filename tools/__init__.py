"""Scripts that run from a clone and are not installed with the plugin: an experimental decoder
(``draft_tree``) and checkpoint tools that the recipes under ``recipes/demo-pair/`` call."""
