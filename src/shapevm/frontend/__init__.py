"""The tracing frontend: `shapevm.numpy`, `jit`, `export`."""
