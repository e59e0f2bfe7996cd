"""The per-epoch lines of a training loop, as the classic tutorials print
them, or condensed for a first look.

The classic tutorials print a line or two per epoch: a thousand epochs are
two thousand lines, the result scrolled far out of sight. With ``progress``
on, the same lines go to one tqdm bar on a terminal (the last line shown
beside it), and in a pipe or a log only those of every tenth of the run are
printed (and the last epoch's, where the run ended or stopped early), so
the result and what led to it fit on a screen. Without it, every line is
printed as the classic tutorials did.
"""

import sys

__all__ = ["EpochLines"]


class EpochLines:
    """``lines(epoch, text)`` reports a line about ``epoch`` of ``n_epochs``;
    ``lines.close()`` ends the bar. ``progress``: False prints every line;
    True condenses them (see the module docstring)."""

    def __init__(self, n_epochs, progress=False, file=None):
        self.file = file or sys.stdout
        self.n_epochs = max(1, int(n_epochs))
        self.progress = bool(progress)
        self.every = max(1, self.n_epochs // 10)
        self._bar = None
        if self.progress and self.file.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.n_epochs, unit="epoch", file=self.file, leave=False,
                             dynamic_ncols=True)
        self._epoch = 0
        self._unshown = []  # the last epoch's lines a pipe has not shown yet

    def __call__(self, epoch, text):
        if not self.progress:
            print(text, file=self.file)
        elif self._bar is not None:
            self._bar.update(epoch - self._bar.n)
            self._bar.set_postfix_str(text.strip(), refresh=True)
        elif epoch % self.every == 0 or epoch == 1 or epoch == self.n_epochs:
            print(text, file=self.file, flush=True)
            self._unshown = []
        else:
            self._unshown = (self._unshown if epoch == self._epoch else []) + [text]
        self._epoch = epoch

    def close(self):
        """End the bar; in a pipe, show the last epoch's lines if not shown."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        for text in self._unshown:
            print(text, file=self.file, flush=True)
        self._unshown = []
