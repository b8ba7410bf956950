"""The base layer: records and types, keys and random primitives, validation, merit, groups,
reward-kind compatibility, declarations. Imports nothing else of bayesfair.
"""
