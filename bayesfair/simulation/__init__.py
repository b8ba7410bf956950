"""The simulation layer: the scan x runs simulator (:mod:`.simulator`), the online metric
accumulators and components (:mod:`.metrics`, :mod:`.metric_parts`) and the results files
(:mod:`.results`).
"""
