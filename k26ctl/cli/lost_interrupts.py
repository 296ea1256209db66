"""A Ctrl-C that Python cannot raise where it lands is delivered again to the main flow.

The SIGINT handler raises KeyboardInterrupt in whatever code runs at that moment. When that is a
finalizer or a weakref callback (the garbage collector runs them at any allocation), Python cannot
propagate it: it prints "Exception ignored in ..." with a traceback and drops the interrupt. A Ctrl-C
pressed while k26ctl was already stopping showed that traceback; one pressed while it worked would
have been lost. The hook below asks for the interrupt again, so the main flow gets it at its next step.
It asks from another thread a moment later: asked from the hook itself, the interrupt is raised at
once, inside the hook, where Python drops it again. Should it land in a finalizer again, it is asked
for again; with SIGINT ignored (the outcome already decided) the request does nothing.
"""

from __future__ import annotations

import _thread
import sys
import time
from typing import Any

_DELAY_SECONDS = 0.01  # the hook returns in microseconds


def _interrupt_main_later() -> None:
    time.sleep(_DELAY_SECONDS)
    _thread.interrupt_main()


def _redeliver(unraisable: Any) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _thread.start_new_thread(_interrupt_main_later, ())
        return
    sys.__unraisablehook__(unraisable)


def redeliver_lost_interrupts() -> None:
    sys.unraisablehook = _redeliver
