"""The inference layer: host-side NUTS fits of whole data sets (:mod:`.fitting`), their model-checking
trees (:mod:`.fit_tree`), simulation-based calibration (:mod:`.sbc`) and the power of the group-bias
GLM's estimand on a real design (:mod:`.glm_power`).
"""

from bayesfair.inference.fitting import Convergence, Fit, GroupBiasData, check_convergence, fit, group_bias_data

__all__ = ["fit", "group_bias_data", "check_convergence", "Fit", "GroupBiasData", "Convergence"]
