"""The global minibatch against the paper's generalization regions (§3, Fig. 6; paper-models §1.3 [S1]).

The paper places the minibatch size in three regions: too small to use the hardware (A), a sweet spot
(B), and too large to generalize (C), and reports the largest sizes trained without a large loss of
accuracy: 8k (Goyal et al.), 32k (You et al., LARS) and 64k; tricks "increase the upper bound ... but do not
remove it" [S1]. ``estimate`` models the time of a step, not convergence, so a large batch gets a note,
never a refusal.
"""
from __future__ import annotations

EIGHT_K, SIXTY_FOUR_K = 8 * 1024, 64 * 1024


def batch_notes(global_batch: int) -> list[str]:
    """Notes on ``global_batch`` (samples per step) from the paper's §3; empty below 8k.

    >>> batch_notes(1024)
    []
    >>> batch_notes(65536)[0][:42]
    'global batch 65,536 is above 8k samples: t'
    """
    b = int(global_batch)
    if b > SIXTY_FOUR_K:
        return [f"global batch {b:,} is above 64k samples, the largest the paper reports trained without a "
                "large loss of accuracy (§3, Fig. 6: region C); the step time is modelled, not convergence"]
    if b > EIGHT_K:
        return [f"global batch {b:,} is above 8k samples: the paper's Fig. 6b shows ResNet-50's ImageNet error "
                "rising beyond about 8k; 32k (LARS) and 64k were reached with large-batch rules (§3); the "
                "step time is modelled, not convergence"]
    return []
