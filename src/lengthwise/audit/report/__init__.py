"""`audit.json` as paper-style plots and one self-contained HTML page; several audits side by side."""
