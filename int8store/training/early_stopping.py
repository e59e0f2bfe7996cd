"""The classic early-stopping loop's numbers, as a run's checkpoint holds
them (:mod:`.run`), and what each may be: a resumed run checks them before
it sets anything, so that a damaged or forged checkpoint is one line naming
it, not a loop that never ends or a traceback deep in the training.

Examples
--------
>>> EARLY_STOPPING["test_score"].refusal(0.07) is None
True
>>> EARLY_STOPPING["best_iter"].refusal(-1)
'-1, expected an integer from 0 to 9223372036854775807'
"""

import math
from dataclasses import dataclass

from ..errors import shown

__all__ = ["LoopNumber", "EARLY_STOPPING"]

#: The largest integer the loop's numbers may be: int64's (they meet numpy there).
_MOST = 2 ** 63 - 1


@dataclass(frozen=True)
class LoopNumber:
    """What one of the loop's numbers may be: a ``kind`` (``int``,
    ``float`` or ``bool``), from ``low`` to ``high``; a float may also be
    +infinity when ``infinite`` (a best score before any)."""

    kind: type
    low: float = 0
    high: float = _MOST
    infinite: bool = False

    def refusal(self, value):
        """Why ``value`` cannot be this number (None when it can)."""
        if self.kind is bool:
            return None if isinstance(value, bool) else \
                f"{shown(value)}, expected true or false"
        number = isinstance(value, int if self.kind is int else (int, float)) \
            and not isinstance(value, bool)
        what = "an integer" if self.kind is int else "a number"
        if number and self.infinite and value == math.inf:
            return None
        # (JSON's integers run to 4,300 digits: math.isnan cannot take them,
        # a message shows them shortened)
        nan = isinstance(value, float) and math.isnan(value)
        if not number or nan or not self.low <= value <= self.high:
            return f"{shown(value)}, expected {what} from {self.low} to {self.high}" + (
                " or infinity" if self.infinite else "")
        return None


#: The numbers of the classic tutorials' loop (patience-based early stopping)
#: and ``finished`` (whether the loop had ended: its patience run out).
EARLY_STOPPING = {
    # (a number: the classic loop compares it with ``iter`` only, and a
    # ``patience_increase`` of 1.5 makes it a float)
    "patience": LoopNumber(float),
    "best_validation_loss": LoopNumber(float, 0, 1, infinite=True),
    "best_iter": LoopNumber(int),
    "test_score": LoopNumber(float, 0, 1),
    "test_count": LoopNumber(int),
    "finished": LoopNumber(bool),
}
