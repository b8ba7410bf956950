"""The inference layer: host-side NUTS fits of whole data sets (:mod:`.fitting`), their model-checking
trees (:mod:`.fit_tree`) and simulation-based calibration (:mod:`.sbc`).
"""

from bayesfair.inference.fitting import Convergence, Fit, GroupBiasData, check_convergence, fit, group_bias_data

__all__ = ["fit", "group_bias_data", "check_convergence", "Fit", "GroupBiasData", "Convergence"]
