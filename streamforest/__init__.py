"""streamforest: online random forests for streams of features."""

from streamforest.forest import FeatureReport, FeatureStreamForest

__all__ = ["FeatureReport", "FeatureStreamForest"]
__version__ = "0.1.0"
