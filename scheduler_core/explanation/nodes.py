"""One node of a cycle's explanation: its filter verdicts, its score terms with their figures, its final score,
answer and rank.

Its own module because both the explanation (``scheduler_core.explanation.explain``, which builds these) and its
wording (``scheduler_core.explanation.summary``, which reads them) need it, and the explanation calls the wording.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_core.explanation.figures import ImageFigures, ResourceFigures, TrafficFigures


@dataclass(frozen=True, slots=True)
class FilterVerdict:
    plugin: str
    reason: str
    detail: str = ""
    """Node-specific figures (the reason itself never has any, so kube-scheduler can count reasons)."""


@dataclass(frozen=True, slots=True)
class ScoreTerm:
    plugin: str
    weight: int
    applicable: bool
    """False when the plugin could not tell the nodes apart for this pod: it carried no weight."""
    normalized: float
    """The plugin's 0..100 score for the node."""
    weighted: float
    """``normalized × weight``."""
    contribution: float
    """Points this term adds to the final score: ``weighted`` / the sum of the applicable weights."""
    raw: float | None = None
    """The plugin's input for the node (received bytes for ``NetworkTraffic``)."""
    note: str = ""
    arithmetic: str = ""
    """How ``normalized`` follows from the figures below, written out with them."""
    traffic: TrafficFigures | None = None
    resources: ResourceFigures | None = None
    images: ImageFigures | None = None


@dataclass(frozen=True, slots=True)
class NodeExplanation:
    node: str
    passed: bool | None
    """None when no filter call was recorded."""
    unresolvable: bool
    verdicts: tuple[FilterVerdict, ...]
    """The failing filter plugins and their reasons; empty for a node that passed."""
    traffic_bytes: float | None
    terms: tuple[ScoreTerm, ...]
    final_score: float | None
    """Weighted mean of the applicable terms, 0..100; None when the node was not scored."""
    extender_score: int | None
    """What kube-scheduler was answered, 0..10."""
    rank: int | None
    """1 for the highest final score (ties keep kube-scheduler's order)."""
    final_arithmetic: str = ""
    """The weighted mean written out with the terms' scores and weights."""
    answer_arithmetic: str = ""
    """How the answer follows from the final score (the profile's answer scale, rounded half up)."""
    kube_scheduler_points: int | None = None
    """What the answer adds to the node's total in kube-scheduler: answer × extender weight × 10 (when the profile
    states the weight)."""
