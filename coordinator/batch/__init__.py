"""`research batch`: many questions, one report and one trace each, against one shared fleet.

- ``questions``: the input file (JSON lines, or one question a line), checked line by line;
- ``store``: the output folder: a report per question, written whole or not at all, so a rerun
  resumes and an interrupted batch loses no finished report;
- ``work``: one question researched and judged by the chaos checker (what every engine runs);
- ``local`` and ``ray_engine``: the engines, in this process or on Ray workers;
- ``summary``: the counts, the table and ``summary.json``;
- ``run``: a batch from start to end: the fleet, the engine, progress, the summary.
"""
