"""The tools' AWS half."""
