"""What a run gives its user: the report (its models), its findings and gaps synthesized from the tasks'
outcomes, the sentences that describe records, and the report rendered for a terminal."""
