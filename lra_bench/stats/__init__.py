"""Statistics behind every accuracy the reports print: intervals (``intervals``), the paired test against a
reference and Holm's correction (``paired``), rank reliability between seed halves (``rank_reliability``)."""
