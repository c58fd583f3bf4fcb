"""Training helpers the tasks use (not registered with fairseq)."""
