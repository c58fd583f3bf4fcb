"""Registered criterions (imported for their ``register_criterion`` side effects)."""
