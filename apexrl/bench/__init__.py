"""Benchmarks shipped with the package: ``apexrl bench <name> --help``. Each writes one JSON result,
stamped with commit, date, host and command, under ./bench-results/."""
