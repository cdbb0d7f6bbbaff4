"""ForestClassifier: the forest of a stream of features as a River classifier."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from river import base
from river.drift import NoDrift

from .driver import ForestDriver, WindowForest
from .pair import WindowPair, long_params


class ForestClassifier(WindowForest, base.Classifier):
    """A :class:`~streamforest.FeatureStreamForest` grown on a window of recent samples, where new keys become features.

    Binary and multiclass. How the sample stream drives the forest:

    * every labelled sample goes into a bounded window of the last ``window_size`` (numpy columns, one per key;
      a sample that lacks a key holds a missing value there), up to ``window_growth`` times as many while the
      forest is not stale;
    * while a single class has been seen there is no forest, and ``predict_proba_one`` returns the label prior
      seen so far (an empty dict before any label); from the second class to ``grace_period`` samples,
      provisional forests grown on the window predict, their leaves of one or two samples, their probabilities
      leaning toward the prior while the samples are few (they change nothing from ``grace_period`` on);
    * at ``grace_period`` samples the first forest is grown on the window, with the keys present in at least
      ``min_key_count`` of its samples (one generation, :meth:`FeatureStreamForest.fit`);
    * a key not yet in the forest that comes to be present in ``min_key_count`` samples of the window arrives as a
      feature: a *generation* of trees forced to use it is grown on the window (older samples lacking it hold
      missing values);
    * every ``refresh_every`` samples without such growth (sooner while the window fills: once it holds a quarter
      more samples than at the last growth), a generation is grown on the current window, so that the model
      follows drift;
    * a class the forest has never seen restarts it on the window;
    * a ``drift_detector`` follows the forest's error: after a change of concept, abrupt or gradual, the window
      forgets the samples from before it and the forest is rebuilt on the new ones (see ``drift_detector``).

    Every generation's weight comes from the bookkeeping of weighted feature use (Motl & Kordík, 2019): each new
    generation outweighs the newest before it, by about ``1 / (1 - max_features)`` when trees see a share
    ``max_features < 1`` of the features, and by about 2 when they see them all (the default, with
    ``split_features`` drawn at each split as in a classic random forest). Old generations thus fade, are pruned
    when their share falls under ``prune_threshold``, and at most ``max_generations`` stay alive: memory and
    prediction cost stay bounded however long the stream.

    Growing, routing and binning run in numba: ``learn_one`` between growths only writes one slot of the window,
    and ``predict_proba_one`` bins one row and routes it through the alive trees. The order of a sample's keys does
    not matter (keys seen for the first time are taken in sorted order); ``x`` is never modified. A key whose first
    value is a string is nominal (its categories are those of the window when it became a feature), otherwise
    numeric; ``None`` (or NaN) is a missing value.

    Parameters
    ----------
    window_size
        How many of the latest labelled samples the forest trains on.
    grace_period
        Samples seen before the first forest is grown.
    refresh_every
        Samples between two generations grown on the window without a new key (``None``: never). Under gradual
        drift, which the detector does not signal, frequent refreshes follow the concept: on River's RandomRBFDrift
        (5,000 samples, moving centroids; ``python -m scenarios.benchmarks.river --only randomrbf_drift``) ROCAUC
        0.907 with 50 against 0.881 with 100 (ARF: 0.903); a smaller window follows closer still. On stationary
        streams, 50 rather than 100 changed ROCAUC by less than 0.002 and costs samples per second (each
        refresh grows ``trees_per_generation`` trees).
    refresh_backoff
        How far the interval between refreshes may grow: after each refresh it doubles, up to ``refresh_backoff``
        times ``refresh_every``, while the forest is not stale (its error on the samples it had not learned, over the
        last ``window_size`` scored and at least 300 since it started or since the last cut, at most the error its
        out-of-bag votes predicted); a cut or a new forest sets it back. 1 (the default) keeps it at
        ``refresh_every``. At 4, on Phishing, Bananas and trapezoidal Phishing (``python -m
        scenarios.benchmarks.river --only phishing,bananas,phishing_trapezoidal --reps 3 --no-recovery
        --refresh-backoff 4``), the forest grows about half as often and Bananas' 5,300 samples take 0.35
        rather than 0.60 seconds (median of 3 runs), at a ROCAUC within 0.001 (RandomRBF's moving centroids keep
        the error above the out-of-bag one: its refreshes never back off). It is not the default because every
        growth saved shifts the seeds of the trees grown after it, and the drift streams come out as another draw
        (the README has the figures).
    min_key_count
        Samples of the window that must hold a key before it becomes a feature.
    trees_per_generation
        Trees grown per generation.
    max_features
        Expected share (float) or count (int) of the features in each tree's subspace.
    split_features
        Share of a tree's subspace drawn anew at each split (``None``: all of it).
    max_depth
        Depth limit of the trees (``None``: unlimited).
    min_samples_leaf
        Least (bootstrap-weighted) number of samples in a leaf.
    max_generations
        Budget of alive generations (past it the two oldest are merged).
    prune_threshold
        Generations whose weight share falls under this are dropped.
    drift_detector
        A River drift detector fed with the forest's error on each sample before it learns it (0/1, or the absolute
        error of a regressor). Default: ``drift.ADWIN(delta=0.05, clock=4)``, checked every 4 samples (River's ARF
        gives each tree an ``ADWIN(delta=0.001)``; one detector on the whole forest's error, which rises less than
        a tree's, needs the larger ``delta`` to notice SEA's shift of threshold at all); ``drift.NoDrift()`` turns
        detection off. When it signals a rise of the error, the window forgets the samples from before the change,
        a generation grown on the recent ones replaces every older one at once (as ARF replaces a tree whose
        detector fired), and a new forest starts once the window holds twice ``grace_period`` samples again (and
        again, on bins of the window, each time it has doubled, up to 256 samples). Through a gradual change (both
        concepts mixed for a while), the old concept's forest keeps scoring the new samples
        with a detector of its own, and each further rise of its error cuts the window again, past the mixed
        samples (as ARF restarts a tree's background learner at each warning). Whatever the detector, the window
        is also cut where a scan of the 0/1 errors in it finds a significant rise (the detector forgets its
        history at every change it signals, a fall of the error too; see ``connectors/river/driver.py``).
        While the error of the last 25 samples the detector scored exceeds that of the last 1,000 significantly
        (3 binomial standard deviations), ``predict_proba_one`` tempers the forest's probabilities by the excess
        (the predicted class stays): through a change the forest's trees are as sure as before while they err
        more often. With ``drift.NoDrift()`` no error is scored and nothing is tempered.
    long_window
        ``None`` (the default): one window. A number above 1: a second forest is driven on a window this many times
        ``window_size``, growing a generation eight times less often (twice the samples an eighth as often, a quarter
        of the first one's growth), with drift handling of its own, and each sample is predicted by the window that
        erred on fewer of the last 300 samples both scored (the short one on a tie, and until both have scored
        samples since the latest cut of either window). A long window draws a sharper boundary on a stationary
        concept; after a change, whichever window's drift handling follows it better predicts. On the 19 streams
        of ``scenarios.benchmarks.river_families``, ``long_window=2.0`` made 1.3-2.4% fewer errors in all and took
        about 1.5 times as long (``python -m scenarios.river_window_switch``; README). It reads the errors the
        drift detector is fed: with ``drift.NoDrift()`` there is one window. Both windows keep their sizes
        (``window_growth`` does not apply).
    window_growth
        How far the window may grow past ``window_size`` (a factor; 1: never). Once the window is full, while the
        forest is not stale (its errors on the samples it had not learned, over the last ``window_size``, at most
        those its out-of-bag votes predicted: see ``refresh_backoff``), the window keeps its older samples, up to
        ``window_growth`` times ``window_size``, and refreshes come as much less often as it is longer (the same
        growth per sample); once the forest is stale (by one standard error), or the window is cut, it holds
        ``window_size`` again. A stationary concept is then learned from more samples (Sine's curved boundary keeps
        sharpening), a moving one (RandomRBF's drifting centroids) from as few as before. On the 19 streams of
        ``scenarios.benchmarks.river_families``, 2 (the default) against 1 made 1.3% and 3.1% fewer errors (data
        seeds 1-2 and 3-4) at 4-7% more time, the out-of-bag votes' cost (README); the window's arrays take
        ``window_growth`` times the room. It reads the errors the drift detector is fed: with ``drift.NoDrift()``
        the window holds ``window_size``, as with ``long_window``.
    seed
        Random seed: the same seed and stream give the same predictions.

    Attributes
    ----------
    forest
        The :class:`~streamforest.FeatureStreamForest` of the ``window_size`` window (``None`` before the first
        one is grown). Its ``generations_`` list the alive generations, with the feature each was forced to use.
    feature_importances
        Importance of every key in the forest.
    n_drifts_detected
        Concept drifts detected so far (the ``window_size`` window's).
    predicting_window
        The size of the window whose forest predicts the next sample (``window_size``, or the long window's).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamforest.connectors.river import ForestClassifier
    >>> model = ForestClassifier(seed=42)
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.ROCAUC())
    ROCAUC: 96.50%
    >>> len(model.forest.generations_) <= model.max_generations
    True

    A key that appears mid-stream (here from the 600th sample on) gets its own generation once ``min_key_count``
    samples of the window hold it:

    >>> model = ForestClassifier(seed=42)
    >>> for i, (x, y) in enumerate(datasets.Phishing().take(650)):
    ...     model.learn_one({k: v for k, v in x.items() if i >= 600 or k != "is_popular"}, y)
    >>> [g["forced"] for g in model.forest.generations_ if g["forced"]]
    [['is_popular']]

    After an abrupt change of concept (STAGGER's rule 0, then rule 2), the drift detector notices the rise of the
    error and the forest is rebuilt on the samples of the new concept:

    >>> from river.datasets import synth
    >>> stream = [*synth.STAGGER(classification_function=0, seed=1).take(1500),
    ...           *synth.STAGGER(classification_function=2, seed=2).take(1500)]
    >>> model, after = ForestClassifier(seed=42), metrics.Accuracy()
    >>> for i, (x, y) in enumerate(stream):
    ...     if i >= 1700:
    ...         after.update(y, model.predict_one(x))
    ...     model.learn_one(x, y)
    >>> model.n_drifts_detected, after.get() > 0.95
    (1, True)
    """

    def __init__(
        self,
        window_size: int = 2000,
        grace_period: int = 50,
        refresh_every: int | None = 50,
        refresh_backoff: int = 1,
        min_key_count: int = 20,
        trees_per_generation: int = 30,
        max_features: float | int = 1.0,
        split_features: float | None = 0.5,
        max_depth: int | None = 16,
        min_samples_leaf: float = 3,
        max_generations: int | None = 8,
        prune_threshold: float = 0.01,
        drift_detector: Any = None,
        long_window: float | None = None,
        window_growth: float = 2.0,
        seed: int | None = None,
    ) -> None:
        # River's clone and parameter checks read the parameters from this signature, so it names WindowForest's
        # again beside long_window (ForestEncoder's does the same for its own).
        if long_window is not None and (isinstance(long_window, bool) or not isinstance(long_window, (int, float))
                                        or not long_window > 1):
            raise ValueError(f"long_window must be a number above 1 or None, got {long_window!r}")
        self.long_window = long_window
        if isinstance(window_growth, bool) or not isinstance(window_growth, (int, float)) or not window_growth >= 1:
            raise ValueError(f"window_growth must be a number of at least 1, got {window_growth!r}")
        self.window_growth = window_growth
        super().__init__(window_size, grace_period, refresh_every, refresh_backoff, min_key_count, trees_per_generation,
                         max_features, split_features, max_depth, min_samples_leaf, max_generations, prune_threshold,
                         drift_detector, seed)
        # The choice between the windows reads the errors the drift handling scores: without it, one window.
        paired = long_window is not None and not isinstance(drift_detector, NoDrift)
        # A pair's windows keep their sizes: the pair is the other way to learn from more samples.
        self._driver.params["window_growth"] = 1.0 if paired else window_growth
        self._pair = WindowPair(self._driver, ForestDriver(long_params(self._driver.params, long_window),
                                                           task=self._task)) if paired else None

    @property
    def _multiclass(self) -> bool:
        return True

    def _predicting(self) -> ForestDriver:
        return self._pair.predicting() if self._pair is not None else self._driver

    @property
    def predicting_window(self) -> int:
        """The size of the window whose forest predicts the next sample (``window_size`` or the long window's)."""
        return self._predicting().params["window_size"]

    def learn_one(self, x: dict[Hashable, Any], y: Any) -> None:
        (self._pair or self._driver).learn(x, y)

    def predict_proba_one(self, x: dict[Hashable, Any], **kwargs: Any) -> dict[base.typing.ClfTarget, float]:
        return self._predicting().predict_proba(x)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        # Small enough for River's checks (a few hundred samples each), large enough to grow every kind of
        # generation within them: the first forest, refreshes and keys arriving late.
        yield {"window_size": 100, "grace_period": 20, "refresh_every": 25, "min_key_count": 5,
               "trees_per_generation": 5, "max_depth": 6, "window_growth": 3.0}
        yield {"window_size": 50, "grace_period": 5, "refresh_every": None, "min_key_count": 1,
               "trees_per_generation": 3, "max_generations": 2, "seed": 1}
        yield {"window_size": 60, "grace_period": 10, "refresh_every": 10, "min_key_count": 5,
               "trees_per_generation": 4, "max_depth": 5, "long_window": 2.0, "seed": 2}
