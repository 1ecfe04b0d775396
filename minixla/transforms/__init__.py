"""Function transformations over traced HLO (see tracing.py)."""
