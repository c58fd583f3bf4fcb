"""Registered models (imported for their ``register_model`` side effects)."""
