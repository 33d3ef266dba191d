"""One module per topic for tools/record_gpu.py: each has `record(topic)` that records its notebooks' GPU scenarios."""
