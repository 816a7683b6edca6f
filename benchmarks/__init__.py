"""The benchmark suite: the paper's ten benchmarks and offline generated task families."""
