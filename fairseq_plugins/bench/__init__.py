"""Benchmarks behind the recipes: decoding latency (``latency``), repetition ratio (``repetition``)."""
