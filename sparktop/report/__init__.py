"""What the command line prints: rich tables and text, and JSON documents.

- :mod:`.snapshot_table`: ``sparktop snapshot``'s node table, sized to the terminal
  (:mod:`.fit` chooses the columns that fit); :mod:`.engines`: its engine tables and the
  engine objects of ``snapshot --json``; :mod:`.alerts`: its ``Alerts`` section.
- :mod:`.budget_text` / :mod:`.budget_json`: ``sparktop budget``'s text and JSON.

Everything here is core (no Textual); the monitor's screens live in :mod:`sparktop.ui`.
"""
