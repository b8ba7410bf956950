"""The study layer: the registry of named constructors, configs, sweeps, tuning, persistence and
resume files, round logs, output folders, reports and the command line.
"""
