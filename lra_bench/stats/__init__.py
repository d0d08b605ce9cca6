"""Statistics behind every accuracy the reports print: intervals over seeds and test examples (``intervals``), the
paired test against a reference with Holm's correction, equivalence and non-inferiority (``paired``), the confidence
set for the best and P(rank 1) (``best``), power and the detectable gap (``power``, with the probit model of 0/1
outcomes in ``probit``), and rank reliability over the splits of the seeds (``rank_reliability``)."""
