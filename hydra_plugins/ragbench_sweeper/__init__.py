"""ragbench's default Hydra sweeper (a Hydra plugin must live in the ``hydra_plugins`` namespace)."""
