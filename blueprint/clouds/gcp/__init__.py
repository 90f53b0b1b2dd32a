"""The tools' Google Cloud half."""
