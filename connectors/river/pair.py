"""A classifier's short and long windows (``ForestClassifier(long_window=...)``), and which of them predicts.

One window is a compromise: a short one follows a change sooner, a long one draws a sharper boundary on a stationary
concept (Sine's smooth two-feature boundary keeps sharpening in ARF's trees, which learn from every sample). So the
classifier can drive two forests on the same stream, one on the last ``window_size`` samples and one on
``long_window`` times as many, each with its own drift handling, and predict each sample with the one that erred on
fewer of the last :data:`SWITCH_ERRORS` samples both scored before learning them (paired learners chosen by their
prequential error: past information only; the short one on a tie). A cut of either window starts the comparison over:
errors before a change say nothing of which window follows the new concept. The two drift handlings also differ
(the long window's scans see more samples): on Sine 0 -> 2 over 500 samples (data seed 1, model seed 1) the long
window cut three times where the short one cut once, and predicted almost every sample from 2,250 to 4,500.

The long forest grows a generation every :data:`LONG_REFRESH` times ``refresh_every`` samples (twice the samples an
eighth as often: a quarter of the short forest's growth); with its own drift scoring and window, the pair takes about
1.5 times the time of one window. ``python -m scenarios.river_window_switch`` measures it against one window and ARF.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from streamforest.rng import derive_seed

from .driver import ForestDriver

#: The long window's forest grows a generation this many times less often than the short one's. Chosen on the
#: families' streams with data seeds 1-2 (model seed 1; errors 12,698 with one window): 4, 12,533; 8, 12,535; 16,
#: 12,613; judged on data seeds 3-4 (model seed 2; 13,092): 4, 12,866; 8, 12,778.
LONG_REFRESH = 8
#: The long window predicts while it erred on fewer of the last this many scored samples than the short one.
SWITCH_ERRORS = 300
_LONG_SALT = 0x10E6


def long_params(params: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """The long window's driver parameters: the short one's, ``factor`` times the window, :data:`LONG_REFRESH` times
    the interval between refreshes, and a seed of its own (derived from the estimator's)."""
    out = dict(params)
    out["window_size"] = round(params["window_size"] * factor)
    if params["refresh_every"] is not None:
        out["refresh_every"] = params["refresh_every"] * LONG_REFRESH
    if params["seed"] is not None:
        out["seed"] = derive_seed(params["seed"], _LONG_SALT)
    return out


class WindowPair:
    """The short window's driver and the long one's, fed the same samples; :meth:`predicting` names the one whose
    recent errors are fewer (the short one on a tie)."""

    def __init__(self, short: ForestDriver, long: ForestDriver) -> None:
        self.short = short
        self.long = long
        # The last choice, and the scored errors and the start of the comparison it saw.
        self._choice: tuple[tuple[tuple[int, int], tuple[int, int]], ForestDriver] | None = None
        self._cuts = (0, 0)  # both drivers' cuts when the comparison last started over
        self._since = (0, 0)  # both drivers' scored errors then

    def learn(self, x: Mapping[Hashable, Any], y: Any) -> None:
        # Both windows check x the same way: the short one refuses it before either has changed.
        self.short.learn(x, y)
        self.long.learn(x, y)
        cuts = (self.short.n_cuts, self.long.n_cuts)
        if cuts != self._cuts:
            # A window was cut: the errors before the change say nothing of which window follows the new concept.
            self._cuts, self._since = cuts, (self.short.n_scored, self.long.n_scored)

    def predicting(self) -> ForestDriver:
        """The driver whose forest predicts the next sample."""
        seen = (self.short.n_scored, self.long.n_scored)
        if self._choice is not None and self._choice[0] == (seen, self._since) and self.long.forest is not None:
            return self._choice[1]  # nothing scored since: errors are scored in batches, not per sample
        n = min(seen[0] - self._since[0], seen[1] - self._since[1], SWITCH_ERRORS)
        if n == 0 or self.long.forest is None:
            return self.short
        chosen = self.long if self.long.recent_errors(n) < self.short.recent_errors(n) else self.short
        self._choice = ((seen, self._since), chosen)
        return chosen
