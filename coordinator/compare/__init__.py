"""``research compare``: the same chaos through generic errors and through the contract, measured.

boundary.py   the one substitution: the contract, or "Operation failed" (the truth kept aside)
figures.py    what one scenario's run shows, figure by figure
runner.py     every scenario through each mode, each mode on a world of its own
plot.py       the comparison as a bar chart
"""
