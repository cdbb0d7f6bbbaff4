"""streamforest: online random forests for streams of features."""

from streamforest.compilation import forget_stale_kernels

forget_stale_kernels()

from streamforest.forest import FeatureReport, FeatureStreamForest  # noqa: E402

__all__ = ["FeatureReport", "FeatureStreamForest"]
__version__ = "0.1.0"
