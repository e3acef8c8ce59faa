"""gpuprov explain: log signatures as data, the streaming scan, diagnoses with facts applied."""
