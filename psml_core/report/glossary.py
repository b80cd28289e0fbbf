"""The report's glossary: what each verdict means, the regime fields, and every abbreviation.

The summary page stays short (the counts of each verdict and where to read on); the rules it
used to spell out in one paragraph are defined here, one term at a time. The abbreviations are
a registry: the glossary lists those the report's text uses (:func:`abbreviations_used`), and a
test checks that every all-caps word of a built report is in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from psml_core.analysis.claim_result import INCONSISTENT, NOT_COMPARABLE

__all__ = [
    "ABBREVIATIONS",
    "CAPS",
    "CAUSES",
    "COUNT_MEANINGS",
    "REGIME_FIELDS",
    "RULES",
    "VERDICT_MEANINGS",
    "abbreviations_used",
    "caps_words",
    "glossary_section",
    "unexplained",
]

VERDICT_MEANINGS = {
    "REPRODUCED": (
        "at least 3 seeds, and the 95% confidence interval of our mean effect inside the "
        "tolerance band around the paper's value (for an accuracy ratio: the mean inside the "
        "paper's ratio plus or minus the largest of the tolerance, the test set's binomial "
        "standard error and the seed standard deviation). A direction-only claim: its primary "
        "metric better beyond the seed spread and by at least a minimum effect fixed in advance, "
        "its other metrics no worse by more than a stated margin (never less than one test "
        "sample), and the method's mean final accuracy at its workload's target."
    ),
    "EXCEEDED": (
        "an “up to” value (or an accuracy drop) whose whole interval lies above the band: a "
        "more favourable setup than the paper's, which is no reproduction."
    ),
    "PARTIAL": (
        "the effect clears the partial floor (by default half the claimed effect on a log "
        "scale) in every seed, but not the band, or with too few seeds for REPRODUCED."
    ),
    "NOT REPRODUCED": (
        "some seed falls below the partial floor, the method diverged, or it never held its "
        "target accuracy (censored)."
    ),
    NOT_COMPARABLE: (
        "a field of the regime the paper gives is off ours beyond its bound (see Regime "
        "fields): what our runs measured would be a verdict on another setting. The verdict "
        "they would have had is kept in the paper's section."
    ),
    INCONSISTENT: (
        "the claim exceeds a bound the paper's own numbers put on it (Amdahl's, from its "
        "comm/compute and density; the arithmetic is printed; where the paper gives several "
        "values for the claim's setting, only a claim above every bound)."
    ),
    "NOT RUN": (
        "this tier has no runs to judge the claim (its paper section names the missing "
        "experiment), or the comparator the paper names diverged."
    ),
    "SETUP FACT": "a quantity our own setup fixes, printed as a fact of the setup, not a finding.",
}
"""Each verdict's rule, in the order of :data:`~psml_core.analysis.claim_result.VERDICTS`."""

COUNT_MEANINGS = {
    "REPRODUCED": "our effect matches the paper's within its tolerance (3 or more seeds)",
    "EXCEEDED": "our effect lies above the paper's band: a more favourable setup",
    "PARTIAL": "part of the effect: above the partial floor, short of the band",
    "NOT REPRODUCED": "below the partial floor, or the method missed its target",
    NOT_COMPARABLE: "our regime is off the paper's: no verdict on the claim as made",
    INCONSISTENT: "the paper's own numbers bound the claim below its value",
    "NOT RUN": "this tier has no runs to judge it",
    "SETUP FACT": "a number our setup fixes, not a finding",
}
"""One line per verdict for the summary page's counts (the full rule: :data:`VERDICT_MEANINGS`)."""

RULES = {
    "comparator": (
        "the baseline the paper names, fixed in its paper file before any run (the strongest of "
        "our configurations where it names a family, such as uniform ratios; for a "
        "direction-only claim the best single configuration on its primary metric)."
    ),
    "robustness": (
        "a second row: the verdict's rule against the strongest of the named comparator and "
        "our other baselines; never the verdict."
    ),
    "codec-free": (
        "a second row: the verdict's rule on the same runs with codec work priced at 0 s (a "
        "sensitivity, where the tier ran it)."
    ),
    "censored": (
        "a run that never held its target accuracy: its time or bytes to target is unknown, "
        "counted at its total as a lower bound, never re-measured by another metric."
    ),
    "diverged": (
        "a run with a non-finite loss or a final test loss at chance: never a baseline; a claim "
        "whose method diverged is NOT REPRODUCED, one whose named comparator diverged NOT RUN."
    ),
    "indicative": "fewer than 3 seeds: no interval, so no verdict can be REPRODUCED.",
    "simulated": "time on the simulator's clock (the sim backend), not wall-clock time.",
}
"""The rules every verdict uses."""

REGIME_FIELDS = {
    "gradient bytes": (
        "the dense reference's gradient bytes per step; off when beyond 10x the paper's."
    ),
    "comm/compute": (
        "the dense reference's communication time over its computation time; off beyond 2x."
    ),
    "bandwidth share": (
        "the part of a worker-step's communication time that is bandwidth rather than latency "
        "(above 0.5 the link is bandwidth-bound); off on the other side of 0.5."
    ),
    "density": (
        "the method's wire bytes per sample over the reference's; off in another class of "
        "dense, ~10%, ~1%, ~0.1% (except for a claim on traffic, whose result is its density)."
    ),
    "codec share": "the share of a step spent encoding and decoding.",
    "workers": "the number of workers; off beyond 2x the paper's.",
    "regime map": (
        "where the paper gives no regime: the claim measured along one axis (comm/compute, "
        "workers, delay variation, locality); a point holds only with 2 or more seeds, each "
        "clearing the floor."
    ),
}
"""What the Regime columns compare, and when a field is off the paper's."""

CAUSES = {
    "method": "a property of the method as the paper describes it.",
    "regime": "our measured regime against the paper's (the data or setup), not the method.",
    "bound": "the paper's own numbers bound the claim.",
    "ours": "a setting or rule of ours: a defect to fix.",
    "run": "a run's fate: diverged, censored, or below its workload's target accuracy.",
    "seeds": "too few seeds for REPRODUCED.",
    "not run": "a missing run or experiment.",
}
"""The classes a verdict's cause is named by (every verdict but REPRODUCED names one)."""

ABBREVIATIONS = {
    "AIMD": "additive increase, multiplicative decrease (a control law)",
    "AMD": "Advanced Micro Devices (a processor maker; EPYC is its server line)",
    "ASP": "asynchronous parallel: a worker never waits for the others",
    "BSP": "bulk synchronous parallel: every worker waits for all the others at each step",
    "CI": "confidence interval",
    "CIFAR": "CIFAR-10, an image data set (Canadian Institute for Advanced Research)",
    "CNN": "convolutional neural network",
    "CPU": "central processing unit",
    "CSV": "comma-separated values (a table file)",
    "DC2": "delay-aware compression control (paper dc2)",
    "DFS": "joint data formatting and sparsification (paper dfs)",
    "DGC": "deep gradient compression: sparsification with momentum correction on the workers",
    "DNN": "deep neural network",
    "DSSP": "dynamic stale synchronous parallel: SSP whose staleness bound adapts while training",
    "EF": "error feedback: what a compressor does not send is added to the next update",
    "EPYC": "AMD's server processor line",
    "GB": "gigabyte, 10⁹ bytes",
    "GPU": "graphics processing unit",
    "GRACE": "a framework of gradient compressors, whose code DC2's baselines use",
    "ICDCS": "International Conference on Distributed Computing Systems",
    "IEEE": "Institute of Electrical and Electronics Engineers",
    "INFOCOM": "IEEE International Conference on Computer Communications",
    "JPDC": "Journal of Parallel and Distributed Computing (paper jpdc)",
    "JSON": "JavaScript Object Notation (a data file format)",
    "L2": "L2 regularisation (weight decay)",
    "LIBSVM": "the LIBSVM library's sparse data format and data set collection",
    "LNICST": "Lecture Notes of the Institute for Computer Sciences, Social Informatics and "
    "Telecommunications Engineering",
    "LR": "learning rate",
    "MB": "megabyte, 10⁶ bytes",
    "MC": "momentum correction (DGC's): momentum accumulated on the workers before sparsifying",
    "METIS": "a graph-partitioning library",
    "ML": "machine learning",
    "MLP": "multi-layer perceptron (a fully connected network)",
    "MNIST": "a data set of 70,000 handwritten digits (Modified National Institute of "
    "Standards and Technology)",
    "MTU": "maximum transmission unit (the largest packet a link carries)",
    "NIC": "network interface card",
    "PCP": "parameter communication prediction (paper pcp's sync policy)",
    "PDF": "Portable Document Format",
    "PF": "the parameter filter of Ratatouille (PF-MxNet and PF-Caffe: its code)",
    "PS": "parameter server: shards that hold the model, which workers push to and pull from",
    "RCV1": "Reuters Corpus Volume 1 (RCV1-v2), a text-classification data set",
    "README": "a repository's read-me file",
    "SD": "standard deviation",
    "SE": "standard error",
    "SGD": "stochastic gradient descent",
    "SHA": "secure hash algorithm (SHA-256: the checksums)",
    "SSP": "stale synchronous parallel: a worker may run at most s steps ahead of the slowest",
    "TCP": "Transmission Control Protocol",
    "TNSE": "IEEE Transactions on Network Science and Engineering",
    "TUN": "a virtual network device of the Linux kernel (a tunnel)",
    "V100": "a data-centre GPU by Nvidia (a cost profile's hardware class)",
}
"""Every abbreviation the report may use, spelled out (the glossary lists those it uses)."""

_VERDICT_WORDS = frozenset(w for v in VERDICT_MEANINGS for w in re.findall(r"[A-Z]+", v))
CAPS = re.compile(r"\b[A-Z][A-Z0-9]+\b")
"""An all-caps word: the tokens the glossary must spell out."""
_DOI = re.compile(r"\bdoi\s+\S+", re.IGNORECASE)


def caps_words(text: str) -> set[str]:
    """The all-caps words of ``text`` (DOIs left out: their parts are no words)."""
    return set(CAPS.findall(_DOI.sub(" ", text)))


def abbreviations_used(texts: Iterable[str]) -> dict[str, str]:
    """The registry's abbreviations that ``texts`` use, in alphabetical order."""
    used = set().union(*(caps_words(t) for t in texts))
    return {k: v for k, v in sorted(ABBREVIATIONS.items()) if k in used}


def glossary_section(texts: Iterable[str]) -> dict[str, list[dict[str, str]]]:
    """The template's glossary: verdicts, rules, regime fields, causes, abbreviations used."""

    def terms(d: dict[str, str]) -> list[dict[str, str]]:
        return [{"term": k, "text": v} for k, v in d.items()]

    return {
        "verdicts": terms(VERDICT_MEANINGS),
        "rules": terms(RULES),
        "regime": terms(REGIME_FIELDS),
        "causes": terms(CAUSES),
        "abbreviations": terms(abbreviations_used(texts)),
    }


def unexplained(text: str) -> set[str]:
    """The all-caps words of ``text`` that neither a verdict nor an abbreviation explains."""
    return caps_words(text) - _VERDICT_WORDS - set(ABBREVIATIONS)
