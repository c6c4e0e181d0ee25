"""The run's plan as a typed record: what bench measures, results store and analysis reads."""
